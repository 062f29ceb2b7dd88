"""`partition-assets backfill plan|run|status|resume|retry|cancel`."""

import argparse
import statistics
import sys
import tomllib
from collections import Counter, defaultdict
from pathlib import Path

import dagster as dg

from partition_assets.backfill.coordinator import (
    current_nodes,
    graph_of,
    run_backfill,
    succeeded_nodes,
)
from partition_assets.backfill.engine import NodeResult, NodeStatus
from partition_assets.backfill.graph import BackfillGraph, BackfillPlanError, Node
from partition_assets.backfill.state import (
    BackfillRecord,
    cancel_in_flight,
    node_states,
)
from partition_assets.cli.heatmap import Heatmap
from partition_assets.deploy.code_root import add_code_root_options

_DEFAULT_SECONDS_PER_NODE = 1.0


def add_backfill_commands(commands) -> None:
    backfill = commands.add_parser("backfill", help="sparse (asset, partition) backfills")
    actions = backfill.add_subparsers(dest="action", required=True)
    for name, text in (("plan", "dry run: nodes, edges, critical path, ETA"), ("run", "run a backfill")):
        parser = actions.add_parser(name, help=text)
        target = parser.add_mutually_exclusive_group()
        target.add_argument("-m", "--module-name", help="code location module (as `dagster -m`)")
        target.add_argument("-f", "--python-file", help="code location file (as `dagster -f`)")
        parser.add_argument("--select", required=True, help="Dagster asset selection, e.g. 'key:daily_orders+'")
        parser.add_argument("--start", help="first day or time, inclusive (ISO 8601)")
        parser.add_argument("--end", help="last day or time, inclusive (ISO 8601)")
        parser.add_argument("--static", action="append", default=[], metavar="DIM=a,b",
                            help="static keys to include for a dimension (repeatable)")
        parser.add_argument("--max-parallel", type=int, default=4)
        parser.add_argument("--asset-limit", action="append", default=[], metavar="ASSET=N",
                            help="at most N concurrent runs of ASSET (repeatable)")
        parser.add_argument("--lookback", type=int, default=0, metavar="N",
                            help="also re-run the N partitions before the range of each time asset")
        parser.add_argument("--exact", action="store_true",
                            help="only partitions wholly inside the range (no coarser grain, no lookback)")
        parser.add_argument("--downstream", action="store_true",
                            help="add every downstream (asset, partition) the range reaches: the lineage cascade")
        parser.add_argument("--no-batch", action="store_true",
                            help="one run per node, even for self-dependent chains of range-capable assets")
        add_code_root_options(parser)
        if name == "run":
            parser.add_argument("--reverse", action="store_true", help="newest partitions first")
            parser.add_argument("--catch-up", action="store_true",
                                help="only partitions missing or failed in the instance")
    for name, text in (
        ("status", "per-asset heatmap of a backfill"),
        ("resume", "finish a backfill: run every node that has not succeeded"),
        ("retry", "re-run failed nodes and their descendants"),
        ("cancel", "stop launching and cancel runs in flight"),
    ):
        parser = actions.add_parser(name, help=text)
        parser.add_argument("backfill_id")
        add_code_root_options(parser)
        if name == "status":
            parser.add_argument("--html", help="also write the heatmap to this HTML file")
            parser.add_argument("--png", help="also write the heatmap to this PNG image")


def run_backfill_command(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except BackfillPlanError as error:
        print(f"partition-assets backfill: {error}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    if args.action in ("plan", "run"):
        record = BackfillRecord(
            module=_target(args),
            selection=args.select,
            start=args.start,
            end=args.end,
            static=_parse_static(args.static),
            max_parallel=args.max_parallel,
            asset_limits=_parse_limits(args.asset_limit),
            lookback=args.lookback,
            exact=args.exact,
            downstream=args.downstream,
            batch=not args.no_batch,
        )
        with dg.DagsterInstance.get() as instance:
            graph = graph_of(record, instance)
            if args.action == "plan":
                print(_describe_plan(graph, _recorded_durations(instance, graph), record.max_parallel))
                return 0
            done = current_nodes(graph, instance) if args.catch_up else set()
        record.save()
        print(f"backfill {record.id}: {graph.node_count()} nodes")
        return _execute(record, graph, done, newest_first=args.reverse)
    record = BackfillRecord.load(args.backfill_id)
    with dg.DagsterInstance.get() as instance:
        if args.action == "status":
            graph = graph_of(record, instance)
            states = {node: state for node, (state, _) in node_states(instance, record.id, graph).items()}
            heatmap = Heatmap(graph, states, f"backfill {record.id} ({record.status}): "
                                                    f"{record.selection} {record.start}..{record.end}")
            print(heatmap.text())
            if args.html:
                Path(args.html).write_text(heatmap.html())
            if args.png:
                heatmap.png(args.png)
            return 0
        if args.action == "cancel":
            record.status = "canceled"
            record.save()
            print(f"backfill {record.id} canceled; {cancel_in_flight(instance, record.id)} runs in flight canceled")
            return 0
        graph = graph_of(record, instance)
        if args.action == "retry" and not any(
            state == NodeStatus.FAILED for state, _ in node_states(instance, record.id, graph).values()
        ):
            print(f"backfill {record.id} has no failed nodes")
            return 0
        done = succeeded_nodes(record, graph, instance)
    return _execute(record, graph, done)


def _execute(record: BackfillRecord, graph: BackfillGraph, done: set[Node], newest_first: bool = False) -> int:
    total = graph.node_count()
    finished = Counter(node.asset for node in done)

    def report(result: NodeResult) -> None:
        asset = result.node.asset
        finished[asset] += 1
        mark = "ok" if result.succeeded else f"FAILED: {result.error}"
        print(f"[{finished.total()}/{total}] {asset.to_user_string()} {finished[asset]}/{len(graph.slices[asset])} "
              f"{result.node.partition or '-'} {result.ended - result.started:.1f}s {mark}", flush=True)

    status = run_backfill(record, graph, done, newest_first, on_result=report)
    outcome = Counter(status.values())
    print(f"backfill {record.id}: " + ", ".join(f"{n} {s.value}" for s, n in sorted(outcome.items())))
    return 0 if outcome[NodeStatus.FAILED] == 0 and outcome[NodeStatus.BLOCKED] == 0 else 1


def _target(args: argparse.Namespace) -> str:
    if args.module_name or args.python_file:
        return args.module_name or str(Path(args.python_file).resolve())
    pyproject = Path("pyproject.toml")
    configured = tomllib.loads(pyproject.read_text()).get("tool", {}).get("dagster", {}) if pyproject.exists() else {}
    if "module_name" not in configured:
        raise SystemExit("name the code location: -m MODULE, -f FILE, or [tool.dagster] module_name in pyproject.toml")
    return configured["module_name"]


def _parse_static(values: list[str]) -> dict[str, list[str]]:
    parsed = {}
    for value in values:
        dimension, _, keys = value.partition("=")
        if not keys:
            raise SystemExit(f"--static {value!r}: write it as DIMENSION=key1,key2")
        parsed[dimension] = keys.split(",")
    return parsed


def _parse_limits(values: list[str]) -> dict[str, int]:
    limits = {}
    for value in values:
        asset, _, limit = value.partition("=")
        if not limit.isdigit() or int(limit) < 1:
            raise SystemExit(f"--asset-limit {value!r}: write it as ASSET=N with N >= 1, e.g. daily_orders=1")
        limits[asset] = int(limit)
    return limits


def _recorded_durations(instance: dg.DagsterInstance, graph: BackfillGraph) -> dict[dg.AssetKey, float]:
    """Median wall time of each asset's recent successful single-asset runs (1 s when unknown)."""
    seconds = defaultdict(list)
    for record in instance.get_run_records(
        dg.RunsFilter(statuses=[dg.DagsterRunStatus.SUCCESS]), limit=2000
    ):
        selection = record.dagster_run.asset_selection or set()
        if len(selection) == 1 and record.start_time and record.end_time:
            seconds[next(iter(selection))].append(record.end_time - record.start_time)
    return {
        key: statistics.median(seconds[key]) if seconds[key] else _DEFAULT_SECONDS_PER_NODE
        for key in graph.slices
    }


def _describe_plan(graph: BackfillGraph, durations: dict[dg.AssetKey, float], max_parallel: int) -> str:
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
        "plan only: nothing was launched",
    ]
    return "\n".join(lines)


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
    node = max(finish, key=finish.get)
    path = []
    while node is not None:
        path.append(node)
        node = via[node]
    return path[::-1], max(finish.values())
