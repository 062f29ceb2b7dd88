"""`partition-assets backfill` and its commands: plan, run, status, list, resume, retry, cancel, pause,
unpause, diff, publish, approve, discard, ledger, rollback.

`act_on_record` is what each command on a recorded backfill runs, whoever asks: this command
line, or the Launchpad's operation jobs (automation/operations.py), so both write the same
records and ledger rows and refuse the same inputs with the same messages."""

import argparse
import json
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg

from partition_assets.automation.detach import submit_coordinator_run
from partition_assets.backfill.dagster_ui.adoption import adopted_plan, hand_back, mark_failed
from partition_assets.backfill.dagster_ui.mirror import mark_canceled
from partition_assets.backfill.planning.graph import BackfillGraph, Node
from partition_assets.backfill.planning.instance_state import graph_of, nodes_to_skip
from partition_assets.backfill.planning.lineage import impact
from partition_assets.backfill.planning.schema_plan import plan_schema_changes
from partition_assets.backfill.planning.spec import (
    DEFAULT_MAX_PARALLEL,
    RUNS_LAUNCHER,
    BackfillSpec,
    add_spec_arguments,
    spec_from_arguments,
)
from partition_assets.backfill.publishing.approving import approval_required, approve, discard, publication_of
from partition_assets.backfill.publishing.freeze import unfreeze
from partition_assets.backfill.publishing.gate import diff_rows, format_diff
from partition_assets.backfill.publishing.publication import Publication
from partition_assets.backfill.publishing.publish import describe_versions
from partition_assets.backfill.publishing.tables import tables_of
from partition_assets.backfill.running.coordinator import BackfillRun
from partition_assets.backfill.running.durations import recorded_seconds
from partition_assets.backfill.running.lineup import launch_line, standings
from partition_assets.backfill.running.local_workers import DagsterNodeRunner, start_fork_server
from partition_assets.backfill.running.progress import Progress
from partition_assets.backfill.running.runners import RunnerFactory, node_runner, node_runner_reusing
from partition_assets.backfill.running.scheduling import NodeStatus
from partition_assets.backfill.state.approval import utc_now
from partition_assets.backfill.state.ledger import LedgerEntry
from partition_assets.backfill.state.liveness import silent_coordinator
from partition_assets.backfill.state.pausing import pause, unpause
from partition_assets.backfill.state.presence import refuse_if_live
from partition_assets.backfill.state.record import (
    BackfillRecord,
    cancel,
    cancel_in_flight,
    node_states,
    succeeded_nodes,
)
from partition_assets.backfill.state.status import COMMANDS, BackfillStatus, check_command
from partition_assets.backfill.state.store import BackfillStore
from partition_assets.cli.heatmap import Heatmap
from partition_assets.code_location import configured_module, load_definitions
from partition_assets.deploy.code_root import add_code_root_options
from partition_assets.errors import (
    ApprovalError,
    BackfillPlanError,
    BackfillStateError,
    CommitError,
    EnvironmentSetupError,
    GateFailedError,
    LeaseLapsedError,
    PartitionAssetsError,
    SparkServerGoneError,
)
from partition_assets.ids import checked_backfill_id
from partition_assets.instance.daemon_filter import ENGINE_TAG, SPARSE, runs_on_engine
from partition_assets.processes.coordinators import await_backfill
from partition_assets.storage.delta.previous import previous_copy
from partition_assets.storage.leases import release

_DEFAULT_SECONDS_PER_NODE = 1.0


def add_backfill_commands(commands: argparse._SubParsersAction) -> None:
    backfill = commands.add_parser("backfill", help="sparse (asset, partition) backfills")
    actions = backfill.add_subparsers(dest="action", required=True)
    for name, text in (("plan", "dry run: nodes, edges, critical path, ETA"), ("run", "run a backfill")):
        parser = actions.add_parser(name, help=text)
        target = parser.add_mutually_exclusive_group()
        target.add_argument("-m", "--module-name", help="code location module (as `dagster -m`)")
        target.add_argument("-f", "--python-file", help="code location file (as `dagster -f`)")
        add_spec_arguments(parser)
        add_code_root_options(parser)
        if name == "run":
            parser.add_argument(
                "--detach",
                action="store_true",
                help="hand the coordinator to the instance's run launcher (a run of the code location's "
                "sparse_backfill job) and return at once",
            )
    for name, text in (
        ("status", "per-asset heatmap of a backfill"),
        ("resume", "finish a backfill: run every node that has not succeeded"),
        ("retry", "re-run failed nodes and their descendants"),
        ("cancel", "stop launching and cancel runs in flight"),
        ("pause", "stop launching new node runs; runs in flight finish"),
        ("unpause", "launch a paused backfill's node runs again"),
        ("adopt", "run a backfill launched from the webserver on the engine (the instance starts it)"),
        ("diff", "per (asset, partition): old and new rows, measure sums and checksums"),
        ("publish", "publish a staged backfill whose gate failed, after review"),
        ("approve", "approve a backfill awaiting approval (or, with --force, one whose gate failed) and publish it"),
        ("discard", "delete a staged backfill's staged data"),
        ("ledger", "what a backfill read and wrote, per (asset, partition)"),
        ("rollback", "restore the partitions a published backfill rewrote"),
    ):
        parser = actions.add_parser(name, help=text)
        parser.add_argument("backfill_id")
        add_code_root_options(parser)
        if name == "status":
            parser.add_argument("--html", help="also write the heatmap to this HTML file")
            parser.add_argument("--png", help="also write the heatmap to this PNG image")
        if name == "publish":
            parser.add_argument(
                "--force", action="store_true", help="publish despite a failed gate or commits made since it started"
            )
        if name == "approve":
            parser.add_argument("--by", required=True, help="who approves (the ledger records the name)")
            parser.add_argument("--force", action="store_true", help="approve despite a failed gate")
        if name == "rollback":
            parser.add_argument(
                "--force", action="store_true", help="roll back despite later commits to its partitions"
            )
        if name == "ledger":
            parser.add_argument("--json", action="store_true", help="print the rows as a JSON list")
    actions.add_parser("list", help="every backfill: status, priority, share of the capacity, queue position, window")
    actions.add_parser(
        "standby", help="wait, warm, for the webserver's next backfill on stdin, then adopt it (the instance starts it)"
    )
    actions.add_parser(
        "serve",
        help="keep Dagster and the engine imported and run this instance's `backfill` commands as forks of this "
        "process, until SIGTERM or Ctrl-C",
    )


def run_backfill_command(args: argparse.Namespace) -> int:
    """Runs `backfill <action>` in the instance of DAGSTER_HOME; a bad input raises a
    PartitionAssetsError before anything is recorded."""
    if args.action in ("plan", "run"):
        spec = spec_from_arguments(args, _target(args))
        on_workers = args.action == "run" and spec.runs_via != RUNS_LAUNCHER and not args.detach
        with _instance() as instance:
            if on_workers:  # before any thread: the server is a fork of this process
                start_fork_server([spec.module], instance)
            # Its workers load while this process plans; a backfill its plan refuses (or leased
            # partitions, or a bad capacity) kills them before they run anything.
            with _warm_runner(spec.module if on_workers else None, spec.max_parallel, instance) as warm:
                return _plan_or_run(args, spec, instance, node_runner_reusing(warm))
    if args.action == "list":
        with _instance() as instance:
            now = datetime.now(UTC)
            for standing in standings(instance, BackfillStore(instance)):
                print(standing.line(now))
            return 0
    if args.action in ("adopt", "standby"):
        with _instance() as instance:
            return _adopt(instance, args.backfill_id) if args.action == "adopt" else _standby(instance)
    backfill_id = checked_backfill_id(args.backfill_id, "the backfill id argument")
    with _instance() as instance:
        record = BackfillStore(instance).load(backfill_id)
        for path in (getattr(args, "html", None), getattr(args, "png", None)):
            if path and not Path(path).resolve().parent.is_dir():
                raise BackfillPlanError(
                    f"cannot write {path}: its folder does not exist; create it or pick another path"
                )
        return act_on_record(args, record, instance)


def _instance() -> dg.DagsterInstance:
    """The Dagster instance of DAGSTER_HOME, where backfills are recorded.

    Raises:
        EnvironmentSetupError: DAGSTER_HOME is not set.
    """
    dagster_home()
    return dg.DagsterInstance.get()


def dagster_home() -> str:
    """DAGSTER_HOME, the folder of the instance where backfills are recorded.

    Raises:
        EnvironmentSetupError: DAGSTER_HOME is not set.
    """
    home = os.environ.get("DAGSTER_HOME")
    if not home:
        raise EnvironmentSetupError(
            "DAGSTER_HOME is not set: backfills are recorded in the Dagster instance; "
            "export DAGSTER_HOME=<folder with dagster.yaml> (make dev uses .dagster_home)"
        )
    return home


def _plan_or_run(
    args: argparse.Namespace, spec: BackfillSpec, instance: dg.DagsterInstance, runner_of: RunnerFactory
) -> int:
    graph = graph_of(spec, instance)
    done = nodes_to_skip(spec, graph, instance)
    definitions = load_definitions(spec.module)
    asset_graph = definitions.resolve_asset_graph()
    readers = {
        key: sorted(c.to_user_string() for c in asset_graph.get(key).child_keys - set(graph.slices))
        for key in graph.slices
    }
    # Refuses a schema change the partitions cannot take before anything is recorded or written.
    schema_plans = plan_schema_changes(tables_of(definitions, graph), readers)
    if args.action == "plan":
        impacted = impact(asset_graph, graph, instance)
        print(_describe_plan(graph, _recorded_durations(instance, graph), spec.max_parallel, impacted))
        for schema_plan in schema_plans:
            print("\n".join(schema_plan.describe()))
        if spec.catch_up:
            print(f"catch-up: {len(done)} of {graph.node_count()} nodes are current and would be skipped")
        return 0
    if args.detach:  # the job records and runs it where runs run
        backfill_id, run = submit_coordinator_run(instance, spec)
        print(
            f"backfill {backfill_id} handed to the run launcher: coordinator run {run.run_id}; follow it with "
            f"`partition-assets backfill status {backfill_id}`"
        )
        return 0
    # Recorded once its leases are taken: a backfill refused for leased partitions leaves no record.
    return _execute(instance, BackfillRecord(spec, store=BackfillStore(instance)), graph, done, runner_of)


def act_on_record(args: argparse.Namespace, record: BackfillRecord, instance: dg.DagsterInstance) -> int:
    """status | resume | retry | cancel | diff | publish | approve | discard | ledger | rollback of a
    recorded backfill, as `args` (the command line's parsed arguments) say; prints what it did.

    Raises:
        PartitionAssetsError: The command does not fit the backfill (its status, a live
            coordinator, a failed gate without --force, ...); the message says what fits.
    """
    if args.action == "status":
        graph = graph_of(record.spec, instance)
        states = {node: state for node, (state, _) in node_states(instance, record.id, graph).items()}
        heatmap = Heatmap(graph, states, f"backfill {record.id} ({record.status}): {record.spec.describe()}")
        print(heatmap.text())
        if record.status == BackfillStatus.PAUSED or record.spec.launch_window() is not None:
            print(launch_line(record, datetime.now(UTC)))  # when it launches next; else it launches at once
        silent = silent_coordinator(instance, record.id, record.status)
        if silent is not None:
            print(silent)
        if record.spec.keep_previous is not None:
            print("\n".join(_previous_versions(publication_of(record, instance))))
        if args.html:
            Path(args.html).write_text(heatmap.html())
        if args.png:
            heatmap.png(args.png)
        return 0
    if args.action in _COORDINATING_ACTIONS:  # before anything below touches its runs or tables
        refuse_if_live(instance, record.id, args.action)
    if args.action in COMMANDS:  # refused by its status, too, before anything is read or written
        check_command(record.id, record.status, args.action)
    if args.action in _PUBLICATION_ACTIONS:
        return _PUBLICATION_ACTIONS[args.action](publication_of(record, instance), instance, args)
    if args.action == "resume" and record.status == BackfillStatus.ROLLING_BACK:  # its coordinator died mid-rollback
        args.force = False
        return _rollback(publication_of(record, instance), instance, args)
    if args.action == "cancel":
        return _cancel(record, instance)
    if args.action in _PAUSING:
        _PAUSING[args.action](record.store, record.id)
        print(f"backfill {record.id} {args.action}d: {_PAUSED_NEXT[args.action]}")
        return 0
    graph = graph_of(record.spec, instance)
    if args.action == "retry" and not any(
        state == NodeStatus.FAILED for state, _ in node_states(instance, record.id, graph).values()
    ):
        print(f"backfill {record.id} has no failed nodes")
        return 0
    return _execute(instance, record, graph, succeeded_nodes(record, graph, instance))


def _cancel(record: BackfillRecord, instance: dg.DagsterInstance) -> int:
    """Stops the backfill: its live coordinator sees the status within a second and kills its
    workers (a dead one's workers died with it: processes/fork_server.py); runs in flight are canceled
    and the freeze lifted now, whether its coordinator is alive or not."""
    cancel(record.store, record.id)
    in_flight = cancel_in_flight(instance, record.id)
    unfreeze(instance, record.id)
    # Its coordinator, if alive, writes the same when it stops; if dead, nobody else would.
    mark_canceled(instance, record.id)
    print(f"backfill {record.id} canceled; {in_flight} runs in flight canceled")
    return 0


def _execute(
    instance: dg.DagsterInstance,
    record: BackfillRecord,
    graph: BackfillGraph,
    done: set[Node],
    runner_of: RunnerFactory = node_runner,
) -> int:
    progress = Progress(record.id, graph, done)
    print(progress.started(), flush=True)
    run = BackfillRun(
        instance,
        record,
        graph,
        done,
        runner_of=runner_of,
        on_result=lambda result: print(progress.line(result), flush=True),
        on_phase=lambda line: print(line, flush=True),
    )
    try:
        status = run.run()
    except (GateFailedError, CommitError, LeaseLapsedError, SparkServerGoneError) as error:  # stopped short
        print(error)
        return 1
    print(progress.summary(status))
    return 0 if progress.failure(status) is None else 1


def _standby(instance: dg.DagsterInstance) -> int:
    """Imports the instance's engine code locations, makes a fork of this process the
    workers' fork server, starts the workers for the first code location (as many as a
    backfill runs by default), then adopts the one Dagster backfill its webserver hands it
    (processes/coordinators.py); exits when it hands none (the webserver is gone)."""
    modules = list(getattr(instance, "engine_modules", []))
    if modules:
        start_fork_server(modules, instance)  # its workers are forks of this process: nothing imported twice
    with _warm_runner(modules[0] if modules else None, DEFAULT_MAX_PARALLEL, instance) as warm:
        if warm is not None:
            warm.wait_until_loaded()
        backfill_id = await_backfill(instance.root_directory)
        return 0 if backfill_id is None else _adopt(instance, backfill_id, warm)


@contextmanager
def _warm_runner(target: str | None, workers: int, instance: dg.DagsterInstance) -> Iterator[DagsterNodeRunner | None]:
    """`workers` workers for code location `target` (None: no workers), loading while
    nothing is asked of them; terminated on exit."""
    runner = DagsterNodeRunner(target, workers, {}, instance) if target is not None else None
    try:
        yield runner
    finally:
        if runner is not None:
            runner.terminate()


def _adopt(instance: dg.DagsterInstance, backfill_id: str, warm: DagsterNodeRunner | None = None) -> int:
    """Runs the webserver-launched Dagster backfill `backfill_id` on the engine, under the
    same id (so `backfill resume <id>` picks it up), on the `warm` workers when they serve
    it, or hands it back to Dagster's daemon when no spec plans exactly its target. Refused
    before its first node for another reason (an engine code location that does not load,
    leased partitions), the Dagster backfill is marked FAILED with the error."""
    checked_backfill_id(backfill_id, "the Dagster backfill id")
    backfill = instance.get_backfill(backfill_id)
    if backfill is None or not runs_on_engine(backfill):
        raise BackfillStateError(
            f"Dagster backfill {backfill_id!r} is not one the engine runs (absent, or not tagged "
            f"{ENGINE_TAG}={SPARSE}): nothing was run"
        )
    try:
        spec, graph = adopted_plan(backfill, getattr(instance, "engine_modules", []), instance)
    except BackfillPlanError as error:
        hand_back(instance, backfill)
        print(error)
        return 0
    except Exception as error:  # an engine code location that does not load, say: nothing ran
        mark_failed(instance, backfill_id, error)
        raise
    record = BackfillRecord(spec, id=backfill_id, store=BackfillStore(instance))
    try:
        return _execute(instance, record, graph, set(), node_runner_reusing(warm))
    except PartitionAssetsError as error:  # refused before its first node, e.g. leased partitions
        mark_failed(instance, backfill_id, error)
        raise


def _diff(publication: Publication, instance: dg.DagsterInstance, args: argparse.Namespace) -> int:
    stats = publication.stats(old_of_every_table=True)
    if not stats:
        print(f"backfill {publication.record.id} has no staged data (it is {publication.record.status})")
        return 0
    for table_stats in stats:
        print(format_diff(diff_rows(table_stats.table.asset.to_user_string(), table_stats.old, table_stats.new)))
    return 0


def _publish(publication: Publication, instance: dg.DagsterInstance, args: argparse.Namespace) -> int:
    record = publication.record
    if record.status == BackfillStatus.GATE_FAILED and not args.force:
        raise BackfillStateError(
            f"backfill {record.id} failed its gate: review `backfill diff {record.id}`, then publish with --force"
        )
    if record.status == BackfillStatus.GATE_FAILED and approval_required(publication):
        raise ApprovalError(
            f"backfill {record.id} failed its gate and requires approval: review `backfill diff {record.id}`, then "
            f"`partition-assets backfill approve {record.id} --by NAME --force`. Nothing was written."
        )
    with publication.held(instance, "publish") as leases:
        versions = publication.publish(instance, force=args.force)
        release(leases)
    print(f"backfill {record.id} published: {describe_versions(versions)}")
    return 0


def _approve(publication: Publication, instance: dg.DagsterInstance, args: argparse.Namespace) -> int:
    versions = approve(publication, instance, args.by, args.force, utc_now())
    print(f"backfill {publication.record.id} approved by {args.by} and published: {describe_versions(versions)}")
    return 0


def _discard(publication: Publication, instance: dg.DagsterInstance, args: argparse.Namespace) -> int:
    files = discard(publication, instance)
    print(f"backfill {publication.record.id} discarded: {files} staged files deleted; the tables are unchanged")
    return 0


def _ledger(publication: Publication, instance: dg.DagsterInstance, args: argparse.Namespace) -> int:
    entries = publication.ledger_entries()
    if args.json:
        print(json.dumps([entry.to_json() for entry in entries], indent=2, default=str))
    else:
        print(format_ledger(entries))
        if publication.record.spec.keep_previous is not None:
            print("\n".join(_previous_versions(publication)))
    return 0


def _previous_versions(publication: Publication) -> list[str]:
    """A line per table whose version before this backfill is kept (--keep-previous)."""
    lines = []
    for table in publication.tables.values():
        copy = previous_copy(table.uri)
        if copy is not None and copy.backfill_id == publication.record.id:
            lines.append(
                f"previous version of {table.asset.to_user_string()} (v{copy.version}) kept as {copy.uri} "
                f"until {copy.expires_at.isoformat(timespec='seconds')} (vacuum drops it after)"
            )
    return lines or [f"no previous version kept by backfill {publication.record.id} (yet)"]


def _rollback(publication: Publication, instance: dg.DagsterInstance, args: argparse.Namespace) -> int:
    with publication.held(instance, "rollback") as leases:
        versions = publication.rollback(instance, force=args.force)
        release(leases)
    print(f"backfill {publication.record.id} rolled back: {describe_versions(versions)}")
    return 0


# Refused while the backfill's coordinator is live (backfill/state/presence.py).
_PAUSING = {"pause": pause, "unpause": unpause}
_PAUSED_NEXT = {
    "pause": "it launches nothing new, its runs in flight finish",
    "unpause": "it launches its nodes again",
}

_COORDINATING_ACTIONS = ("resume", "retry", "publish", "approve", "discard", "rollback")

_PUBLICATION_ACTIONS = {
    "diff": _diff,
    "publish": _publish,
    "approve": _approve,
    "discard": _discard,
    "ledger": _ledger,
    "rollback": _rollback,
}


def format_ledger(entries: list[LedgerEntry]) -> str:
    """The ledger rows as a terminal table."""
    lines = [f"{'asset':<28} {'partition':<22} {'status':<12} {'rows':>8} {'version':>7}  checksum"]
    for entry in entries:
        version = "-" if entry.published_version is None else str(entry.published_version)
        lines.append(
            f"{entry.asset:<28} {entry.partition or '-':<22} {entry.status.value:<12} {entry.rows or 0:>8} "
            f"{version:>7}  {entry.checksum or '-'}"
        )
    return "\n".join(lines)


def _target(args: argparse.Namespace) -> str:
    if args.module_name or args.python_file:
        return args.module_name or str(Path(args.python_file).resolve())
    return configured_module()


def _recorded_durations(instance: dg.DagsterInstance, graph: BackfillGraph) -> dict[dg.AssetKey, float]:
    """Each asset's seconds per node as earlier engine runs measured them (1 s when unknown)."""
    recorded = recorded_seconds(instance, graph)
    return {key: recorded.get(key, _DEFAULT_SECONDS_PER_NODE) for key in graph.slices}


def _describe_plan(
    graph: BackfillGraph,
    durations: dict[dg.AssetKey, float],
    max_parallel: int,
    impacted: Mapping[dg.AssetKey, int],
) -> str:
    lines = [f"{'asset':<32} {'nodes':>8} {'edges in':>9} {'s/node':>7}"]
    for key, asset_slice in graph.slices.items():
        edges = sum(d.edge_count() for d in graph.dependencies[key])
        lines.append(f"{key.to_user_string():<32} {len(asset_slice):>8} {edges:>9} {durations[key]:>7.2f}")
    path, length = _critical_path(graph, durations)
    work = sum(len(s) * durations[k] for k, s in graph.slices.items())
    eta = max(length, work / max_parallel)
    lines += [
        f"total: {graph.node_count()} nodes, {graph.edge_count()} edges",
        f"critical path: {len(path)} nodes, {length:.1f} s: "
        + " -> ".join(f"{n.asset.to_user_string()}[{n.partition}]" for n in path[:6])
        + (" -> ..." if len(path) > 6 else ""),
        f"ETA with {max_parallel} slots: {eta:.1f} s (max of critical path and work/slots)",
        _describe_impact(impacted),
        "plan only: nothing was launched",
    ]
    return "\n".join(lines)


def _describe_impact(impacted: Mapping[dg.AssetKey, int], shown: int = 8) -> str:
    if not impacted:
        return "impact: no asset outside the selection reads a rewritten partition"
    named = [f"{key.to_user_string()} ({count})" for key, count in impacted.items()]
    more = f" and {len(named) - shown} more" if len(named) > shown else ""
    assets = (
        "1 asset outside the selection reads" if len(named) == 1 else f"{len(named)} assets outside the selection read"
    )
    return (
        f"impact: {assets} rewritten partitions "
        f"(partitions affected; add --downstream to rewrite them too): {', '.join(named[:shown])}{more}"
    )


def _critical_path(graph: BackfillGraph, durations: dict[dg.AssetKey, float]) -> tuple[list[Node], float]:
    finish: dict[Node, float] = {}
    via: dict[Node, Node | None] = {}
    # Slices are in topological order and partitions in time order, so parents come first.
    for node in graph.nodes():
        best = max(graph.upstream(node), key=lambda p: finish[p], default=None)
        finish[node] = (finish[best] if best else 0.0) + durations[node.asset]
        via[node] = best
    if not finish:
        return [], 0.0
    last: Node | None = max(finish, key=lambda n: finish[n])
    path = []
    while last is not None:
        path.append(last)
        last = via[last]
    return path[::-1], max(finish.values())
