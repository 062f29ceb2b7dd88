"""Runs a recorded backfill: plans its graph, launches its nodes, honours cancel.

Shared by every surface that starts a backfill (the CLI, a Dagster job, a sensor),
so each behaves the same and leaves the same record.
"""

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from contextlib import ExitStack, contextmanager
from types import MappingProxyType
from typing import Protocol

import dagster as dg

from partition_assets.backfill.dagster_ui.mirror import DagsterBackfillMirror
from partition_assets.backfill.planning.graph import BackfillGraph, Node, plan
from partition_assets.backfill.planning.spec import RUNS_LAUNCHER, STAGED, BackfillSpec, Wording, flag_of
from partition_assets.backfill.publishing.gate import GateCheck, format_checks
from partition_assets.backfill.publishing.notify import EventKind
from partition_assets.backfill.publishing.originals import (
    Pins,
    break_runs_between_pins,
    originals,
    pin_inputs,
    pins_from_json,
    pins_to_json,
    runtime_warnings,
)
from partition_assets.backfill.publishing.publication import Publication, StatsAhead, TableStats, describe_versions
from partition_assets.backfill.publishing.tables import unstaged_assets
from partition_assets.backfill.running.launcher import LaunchedNodeRunner
from partition_assets.backfill.running.local_workers import DagsterNodeRunner, TaggedRunner
from partition_assets.backfill.running.loop import execute
from partition_assets.backfill.running.scheduling import NodeResult, NodeStatus, RunUnit, Throttle
from partition_assets.backfill.state.record import (
    BackfillRecord,
    SavedStatus,
    cancel_in_flight,
    node_states,
)
from partition_assets.code_location import load_definitions
from partition_assets.deploy.runtime import runtime_versions
from partition_assets.errors import CommitError, GateFailedError, LeaseLapsedError
from partition_assets.run_tags import node_run_tags, pinned_input_tags
from partition_assets.storage.leases import Lease, park, release

_CHECKS_SHOWN = 3
_log = logging.getLogger(__name__)


def graph_of(spec: BackfillSpec, instance: dg.DagsterInstance, wording: Wording = flag_of) -> BackfillGraph:
    """The spec's graph, planned against its code location and the instance's dynamic partitions;
    a refusal names the spec's fields as `wording` does (see `plan`)."""
    asset_graph = load_definitions(spec.module).resolve_asset_graph()
    return plan(asset_graph, spec, dynamic_partitions_store=instance, wording=wording)


def nodes_to_skip(spec: BackfillSpec, graph: BackfillGraph, instance: dg.DagsterInstance) -> set[Node]:
    """What a new backfill of `spec` leaves alone: the current nodes with `catch_up`, else none."""
    return current_nodes(graph, instance) if spec.catch_up else set()


def current_nodes(graph: BackfillGraph, instance: dg.DagsterInstance) -> set[Node]:
    """The graph's nodes that hold a materialization whose latest run did not fail since:
    what catch-up leaves alone (Dagster's partition status, as the UI colours it)."""
    failed = {
        Node(key, partition)
        for key, asset_slice in graph.slices.items()
        if asset_slice.partitions_def is not None
        for partition in failed_partitions(instance, key, asset_slice.partitions_def, asset_slice.partition_keys)
    }
    return _materialized(graph, instance) - failed


def failed_partitions(
    instance: dg.DagsterInstance, key: dg.AssetKey, partitions_def: dg.PartitionsDefinition, keys: Iterable[str]
) -> set[str]:
    """Partitions of `keys` whose latest run failed to materialize them."""
    status = instance.get_status_by_partition(key, list(keys), partitions_def) or {}
    return {k for k, s in status.items() if s == dg.AssetPartitionStatus.FAILED}


def _materialized(graph: BackfillGraph, instance: dg.DagsterInstance) -> set[Node]:
    return {
        Node(key, partition)
        for key, asset_slice in graph.slices.items()
        for partition in (
            instance.get_materialized_partitions(key)
            if asset_slice.partitions_def
            else ({""} if instance.get_latest_materialization_event(key) else set())
        )
        if partition in asset_slice.index_of
    }


def succeeded_nodes(record: BackfillRecord, graph: BackfillGraph, instance: dg.DagsterInstance) -> set[Node]:
    """Nodes whose latest run in this backfill succeeded; runs a dead coordinator left
    in flight are canceled first, since nobody will finish them."""
    cancel_in_flight(instance, record.id)
    return {
        node for node, (state, _) in node_states(instance, record.id, graph).items() if state == NodeStatus.SUCCEEDED
    }


class NodeRunner(Protocol):
    """What runs a backfill's units: `DagsterNodeRunner` (local workers) or `LaunchedNodeRunner`."""

    def launch(self, unit: RunUnit, unit_tags: Mapping[str, str] = MappingProxyType({})) -> Future:
        """Starts `unit` as one run, also tagged `unit_tags`; the future gives a result per node of the unit."""

    def close(self) -> None:
        """Waits for the runs in flight (local workers) or leaves them to their launcher."""

    def terminate(self) -> None:
        """Stops the runs in flight, then closes."""


# Makes the runner of a spec's nodes, given the tags of each of its runs.
RunnerFactory = Callable[[BackfillSpec, dict[str, str]], NodeRunner]


def node_runner(spec: BackfillSpec, tags: dict[str, str]) -> NodeRunner:
    """The runner `spec.runs_via` names: local worker processes, or the instance's run launcher."""
    if spec.runs_via == RUNS_LAUNCHER:
        return LaunchedNodeRunner(spec.module, tags)
    return DagsterNodeRunner(spec.module, spec.max_parallel, tags)


def node_runner_reusing(warm: DagsterNodeRunner | None) -> RunnerFactory:
    """`node_runner`, except that a spec `warm` (local workers started before the backfill
    was known) serves runs on it, its runs tagged as the backfill's; `warm` is terminated
    when it cannot serve."""

    def runner_of(spec: BackfillSpec, tags: dict[str, str]) -> NodeRunner:
        if warm is not None and spec.runs_via != RUNS_LAUNCHER and warm.serves(spec.module, spec.max_parallel):
            return TaggedRunner(warm, tags)
        if warm is not None:
            warm.terminate()
        return node_runner(spec, tags)

    return runner_of


def run_backfill(
    record: BackfillRecord,
    graph: BackfillGraph,
    done: set[Node],
    on_result: Callable[[NodeResult], None] = lambda result: None,
    on_phase: Callable[[str], None] = lambda line: None,
    runner_of: RunnerFactory = node_runner,
) -> dict[Node, NodeStatus]:
    """Runs every node of `graph` not in `done`, holding leases on the partitions it
    writes and its assets frozen; stops launching once the record is canceled (or its
    Dagster backfill is canceled in the UI). The Dagster backfill of the same id (created
    when absent: backfill/dagster_ui/mirror.py) shows its status and per-partition progress.
    `on_result` sees each node's result, `on_phase` a line per step after the nodes
    (the gate, the publish).

    A staged backfill (the default) then evaluates its gate and publishes every table
    in one commit each (partition_assets/backfill/publishing/publication.py); a failed gate raises
    GateFailedError with nothing published. One that was publishing when its
    coordinator died only finishes publishing. With `--inputs-as-of`, each node reads
    the input versions pinned on the first start (backfill/publishing/originals.py). `runner_of`
    makes what runs the nodes (bench/scale_bench.py passes one whose runs finish at once,
    to measure everything else).
    """
    definitions = load_definitions(record.spec.module)
    with ExitStack() as stack:
        # Workers start loading the code location now, while the coordinator prepares.
        runner = stack.enter_context(_node_runner(record, runner_of)) if record.status != "publishing" else None
        return _prepare_and_run(record, graph, done, on_result, on_phase, definitions, runner)


def _prepare_and_run(
    record: BackfillRecord,
    graph: BackfillGraph,
    done: set[Node],
    on_result: Callable[[NodeResult], None],
    on_phase: Callable[[str], None],
    definitions: dg.Definitions,
    runner: NodeRunner | None,
) -> dict[Node, NodeStatus]:
    publication = Publication(record, definitions, graph)
    staged = record.spec.publish == STAGED
    if staged:
        for table in publication.tables.values():
            table.staging_format  # noqa: B018 -- refuses a format that cannot publish at once, before any run
        unstaged = unstaged_assets(definitions, graph)
        if unstaged:
            _log.warning(
                "backfill %s: %s are stored by other IO managers, which write them as their nodes run: "
                "readers see those before the backfill publishes",
                record.id,
                ", ".join(key.to_user_string() for key in unstaged),
            )
    with dg.DagsterInstance.get() as instance:
        return _run_held(record, graph, done, runner, on_result, on_phase, publication, instance)


def _run_held(
    record: BackfillRecord,
    graph: BackfillGraph,
    done: set[Node],
    runner: NodeRunner | None,
    on_result: Callable[[NodeResult], None],
    on_phase: Callable[[str], None],
    publication: Publication,
    instance: dg.DagsterInstance,
) -> dict[Node, NodeStatus]:
    staged = record.spec.publish == STAGED
    definitions = publication.definitions
    pins = {} if record.status == "publishing" else _pins_of_rerun(record, definitions, graph, instance)
    asset_graph = definitions.resolve_asset_graph()
    with (
        publication.held(instance) as leases,
        # Once its leases are taken: a backfill refused for leased partitions shows in no list.
        DagsterBackfillMirror(record, graph, asset_graph, instance, done) as mirror,
    ):
        if runner is None:  # its coordinator died publishing: only the publish is left
            _publish(publication, leases, instance, on_phase)
            return {}
        publication.notify("started", record.spec.describe())
        ahead = StatsAhead(publication, done) if staged else None

        def node_finished(result: NodeResult) -> None:
            if ahead is not None:
                ahead.finished(result)
            mirror.finished(result)
            on_result(result)

        try:
            status = _run_nodes(record, graph, done, runner, node_finished, mirror.launched, pins)
            mirror.settle(status)
            ahead_stats = ahead.results() if ahead is not None and _all_succeeded(status) else None
        finally:
            if ahead is not None:
                ahead.close()
        if _stopped_by_command(record):
            _stop(publication, leases, staged, "canceled", "")
        elif not _all_succeeded(status):
            record.status = "failed"
            record.save()
            _stop(publication, leases, staged, "failed", "nodes failed: nothing was published")
        elif not staged:
            record.status = "done"
            record.save()
            release(leases)
        else:
            _gate_and_publish(record, publication, leases, instance, ahead_stats, on_phase)
    return status


def _gate_and_publish(
    record: BackfillRecord,
    publication: Publication,
    leases: list[Lease],
    instance: dg.DagsterInstance,
    ahead_stats: Mapping[dg.AssetKey, TableStats | None] | None,
    on_phase: Callable[[str], None],
) -> None:
    """Gates a staged backfill whose nodes all succeeded, then publishes it, unless it was
    canceled meanwhile or lost its leases (both are checked again before publishing)."""
    _check_held(record, publication, leases)
    started = time.monotonic()
    checks = publication.gate(instance, ahead_stats)
    failed = [check for check in checks if not check.passed]
    on_phase(f"gate: {len(checks) - len(failed)} of {len(checks)} checks passed ({time.monotonic() - started:.1f} s)")
    if failed:
        record.status = "gate_failed"
        record.save()
        _stop(publication, leases, True, "gate_failed", f"{len(failed)} checks failed")
        raise GateFailedError(gate_failure(record.id, failed))
    if _stopped_by_command(record):
        _stop(publication, leases, True, "canceled", "")
        return
    _check_held(record, publication, leases)
    _publish(publication, leases, instance, on_phase)


def _publish(
    publication: Publication, leases: list[Lease], instance: dg.DagsterInstance, on_phase: Callable[[str], None]
) -> None:
    """Publishes, then lets the leases go; a publish refused or stopped by a foreign commit
    keeps the partitions leased (parked) for the `publish --force`, discard or rollback to come."""
    try:
        on_phase(_timed("published", lambda: publication.publish(instance)))
    except CommitError as error:
        _stop(publication, leases, True, "failed", str(error))
        raise
    release(leases)


def _check_held(record: BackfillRecord, publication: Publication, leases: list[Lease]) -> None:
    """Fails the backfill (LeaseLapsedError, nothing published) when its leases lapsed."""
    try:
        publication.check_held()
    except LeaseLapsedError as error:
        record.status = "failed"
        record.save()
        _stop(publication, leases, True, "failed", str(error))
        raise


def _stopped_by_command(record: BackfillRecord) -> bool:
    """Whether `backfill cancel` (or a cancel in the UI) stopped the backfill: read again
    from its saved record, which other processes change."""
    return BackfillRecord.load(record.id).status == "canceled"


def _pins_of_rerun(
    record: BackfillRecord, definitions: dg.Definitions, graph: BackfillGraph, instance: dg.DagsterInstance
) -> dict[Node, Pins]:
    """The input versions each node reads (decided on the backfill's first start, then
    kept in its record), after warning about partitions written on another runtime."""
    found = originals(instance, graph)
    for line in runtime_warnings(found, runtime_versions()):
        _log.warning("backfill %s: %s", record.id, line)
    if record.pinned_inputs is None and record.spec.inputs_as_of is not None:
        record.pinned_inputs = pins_to_json(pin_inputs(record.spec, definitions, graph, found))
    pins = pins_from_json(record.pinned_inputs or {})
    break_runs_between_pins(graph, pins)
    return pins


def _timed(what: str, step: Callable[[], dict[str, int | None]]) -> str:
    """`step()`'s table versions as one line: `published: a v3, b v7 (0.4 s)`."""
    started = time.monotonic()
    versions = step()
    return f"{what}: {describe_versions(versions)} ({time.monotonic() - started:.1f} s)"


def _all_succeeded(status: Mapping[Node, NodeStatus]) -> bool:
    return all(state == NodeStatus.SUCCEEDED for state in status.values())


def _stop(publication: Publication, leases: list[Lease], staged: bool, kind: EventKind, detail: str) -> None:
    """A backfill that stops short of publishing: a staged one keeps its partitions
    leased (parked) until it is published, resumed or discarded; one publishing per
    node lets them go."""
    if staged:
        park(leases)
    else:
        release(leases)
    publication.notify(kind, detail)


def gate_failure(backfill_id: str, failed: Sequence[GateCheck]) -> str:
    """What failed the gate, and the three ways on."""
    shown = format_checks(failed[:_CHECKS_SHOWN])
    more = f"\n... and {len(failed) - _CHECKS_SHOWN} more" if len(failed) > _CHECKS_SHOWN else ""
    return (
        f"{shown}{more}\nbackfill {backfill_id}: the validation gate failed ({len(failed)} checks); nothing was "
        f"published. Review `partition-assets backfill diff {backfill_id}`, then `backfill publish {backfill_id} "
        f"--force` or `backfill discard {backfill_id}`."
    )


@contextmanager
def _node_runner(record: BackfillRecord, runner_of: RunnerFactory) -> Iterator[NodeRunner]:
    """What launches the backfill's runs (`runner_of`: by default local workers, or the
    instance's run launcher with `--runs-via launcher`). `_run_nodes` stops it once the
    nodes are done (`_stop_runner`); whatever is left on exit is killed: the idle workers of
    a backfill refused before its nodes started (it may not even be recorded)."""
    spec = record.spec
    runner = runner_of(spec, {**spec.tags, **node_run_tags(record.id, spec.publish == STAGED)})
    try:
        yield runner
    finally:
        runner.terminate()


def _stop_runner(record: BackfillRecord, runner: NodeRunner) -> None:
    """A canceled backfill's runs in flight are stopped and marked canceled; otherwise
    they are waited for. Stopping a stopped runner does nothing more."""
    if _stopped_by_command(record):
        runner.terminate()
        with dg.DagsterInstance.get() as instance:
            cancel_in_flight(instance, record.id)
    else:
        runner.close()


def _run_nodes(
    record: BackfillRecord,
    graph: BackfillGraph,
    done: set[Node],
    runner: NodeRunner,
    on_result: Callable[[NodeResult], None],
    on_launch: Callable[[RunUnit], None],
    pins: Mapping[Node, Pins],
) -> dict[Node, NodeStatus]:
    record.status = "running"
    record.save()
    spec = record.spec

    def launch(unit: RunUnit) -> Future:
        on_launch(unit)
        # Pins differ only between units (break_runs_between_pins): the first member speaks for all.
        as_of = spec.inputs_as_of
        return runner.launch(unit, pinned_input_tags(as_of, pins.get(unit.nodes[0], {})) if as_of else {})

    # Asked after every finished unit: a full load parses the whole record (quadratic in total).
    saved_status = SavedStatus(record.id)

    try:
        throttle = Throttle(
            spec.max_parallel,
            {dg.AssetKey.from_user_string(asset): limit for asset, limit in spec.asset_limits.items()},
        )
        return execute(
            graph,
            launch,
            throttle,
            done=done,
            on_result=on_result,
            newest_first=spec.reverse,
            should_stop=lambda: saved_status.current() == "canceled",
            batch_chains=spec.batch,
        )
    finally:  # the workers' memory is free before the gate and the publish
        _stop_runner(record, runner)
