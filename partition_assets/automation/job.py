"""The sparse backfill engine as a Dagster job, launched from the Launchpad or by a sensor.

The job's one op is the backfill's coordinator: it records the backfill, runs it
through the coordinator (the same as `partition-assets backfill run`) and logs each
node's result. The coordinator run carries the backfill id tag too, so filtering runs
by `partition_assets/backfill_id=<id>` in the UI shows it beside its node runs.
"""

import uuid
from collections import Counter

import dagster as dg
from pydantic import Field

from partition_assets.backfill.coordinator import (
    current_nodes,
    graph_of,
    run_backfill,
    succeeded_nodes,
)
from partition_assets.backfill.engine import NodeResult, NodeStatus
from partition_assets.backfill.graph import BackfillPlanError
from partition_assets.backfill.state import (
    BACKFILL_ID_TAG,
    BackfillRecord,
    cancel_in_flight,
    record_path,
)

COORDINATOR_OP = "coordinate_backfill"


class SparseBackfillConfig(dg.Config):
    """A backfill's parameters, as `partition-assets backfill run` takes them."""

    selection: str = Field(description="Dagster asset selection, e.g. 'key:daily_orders+'")
    start: str | None = Field(default=None, description="first day or time, inclusive (ISO 8601)")
    end: str | None = Field(default=None, description="last day or time, inclusive (ISO 8601)")
    static: dict[str, list[str]] = Field(
        default_factory=dict, description="static keys to include, by dimension name"
    )
    max_parallel: int = Field(default=4, description="node runs at once")
    asset_limits: dict[str, int] = Field(
        default_factory=dict, description="at most N concurrent runs of an asset, by asset key"
    )
    lookback: int = Field(default=0, description="also re-run the N partitions before the range")
    exact: bool = Field(default=False, description="only partitions wholly inside the range")
    downstream: bool = Field(default=False, description="plus every downstream partition the range reaches")
    batch: bool = Field(default=True, description="let contiguous partitions share range runs")
    catch_up: bool = Field(default=False, description="only partitions missing or failed in the instance")
    reverse: bool = Field(default=False, description="newest partitions first")


def sparse_backfill_job(module: str, name: str = "sparse_backfill") -> dg.JobDefinition:
    """A job whose run plans and runs a sparse backfill of the code location `module`.

    `module` is what the node runs load (a module name or a .py path), normally the
    code location that serves this job.
    """

    @dg.op(name=COORDINATOR_OP)
    def coordinate(context: dg.OpExecutionContext, config: SparseBackfillConfig) -> None:
        backfill_id = context.run.tags.get(BACKFILL_ID_TAG)
        if backfill_id is None:  # launched from the Launchpad: tag this run after the fact
            backfill_id = uuid.uuid4().hex[:12]
            context.instance.add_run_tags(context.run_id, {BACKFILL_ID_TAG: backfill_id})
        record = BackfillRecord(
            module=module, selection=config.selection, start=config.start, end=config.end,
            static=config.static, max_parallel=config.max_parallel, asset_limits=config.asset_limits,
            lookback=config.lookback, exact=config.exact, downstream=config.downstream,
            batch=config.batch, id=backfill_id,
        )
        try:
            graph = graph_of(record, context.instance)
        except BackfillPlanError as error:
            raise dg.Failure(description=f"backfill not planned: {error}") from None
        done = current_nodes(graph, context.instance) if config.catch_up else set()
        if context.run.parent_run_id and record_path(backfill_id).exists():
            # Re-executed from the UI: the run kept its backfill's tag; resume that backfill.
            done |= succeeded_nodes(record, graph, context.instance)
        record.save()
        total = graph.node_count()
        context.log.info(
            f"backfill {backfill_id}: {total} nodes, {len(done)} already current; "
            f"its runs carry the tag {BACKFILL_ID_TAG}={backfill_id}"
        )
        finished = Counter()

        def report(result: NodeResult) -> None:
            finished[result.succeeded] += 1
            mark = "ok" if result.succeeded else f"FAILED: {result.error}"
            context.log.info(
                f"[{sum(finished.values()) + len(done)}/{total}] {result.node.asset.to_user_string()} "
                f"{result.node.partition or '-'} {result.ended - result.started:.1f}s {mark} (run {result.run_id})"
            )

        try:
            status = run_backfill(record, graph, done, config.reverse, on_result=report)
        except BaseException:
            # Terminated from the UI (or crashed): record it, so that `backfill resume` picks it up.
            record.status = "canceled"
            record.save()
            cancel_in_flight(context.instance, backfill_id)
            raise
        outcome = Counter(status.values())
        summary = ", ".join(f"{n} {s.value}" for s, n in sorted(outcome.items()))
        if BackfillRecord.load(backfill_id).status == "canceled":  # `partition-assets backfill cancel`
            raise dg.Failure(description=f"backfill {backfill_id} canceled: {summary}")
        failed = sorted(node for node, state in status.items() if state == NodeStatus.FAILED)
        if failed or outcome[NodeStatus.BLOCKED]:
            names = ", ".join(f"{n.asset.to_user_string()}[{n.partition}]" for n in failed[:10])
            raise dg.Failure(
                description=(
                    f"backfill {backfill_id}: {summary}. Failed: {names}"
                    f"{' …' if len(failed) > 10 else ''}; {outcome[NodeStatus.BLOCKED]} nodes blocked "
                    f"behind them. Fix and run `partition-assets backfill retry {backfill_id}`."
                ),
                metadata={"backfill_id": backfill_id, "failed": len(failed),
                          "blocked": outcome[NodeStatus.BLOCKED]},
            )
        context.log.info(f"backfill {backfill_id}: {summary}")

    @dg.job(
        name=name,
        # The op only coordinates: no step subprocess; the node runs are the real work.
        executor_def=dg.in_process_executor,
        description=(
            "Sparse (asset, partition) backfill: each node starts when its own upstream nodes "
            "succeed. Launch with config {selection, start, end, ...}; filter runs by the tag "
            f"{BACKFILL_ID_TAG} to see the node runs."
        ),
    )
    def sparse_backfill():
        coordinate()

    return sparse_backfill


def backfill_run_config(**config) -> dict:
    """Run config for the job, e.g. `backfill_run_config(selection="key:a", start=..., end=...)`."""
    return {"ops": {COORDINATOR_OP: {"config": SparseBackfillConfig(**config).model_dump(exclude_none=True)}}}
