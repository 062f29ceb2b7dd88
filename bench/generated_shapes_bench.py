"""The engine's whole `backfill run` command on generated DAG shapes and on the bench DAG,
against the bound: how far from the best possible it ends on DAGs it was not tuned on.

Shapes: seeds `--seeds` of bench/dag_shapes.py (chains, running totals, rolling windows,
weekly and monthly fan-in, fan-out, diamonds, wide layers, static x daily assets; 0.1-2 s of
simulated work per partition; Dagster's default policy, range-capable ones, or a mix), each
over its 7-14 days, plus the bench DAG (bench/engine_dag.py) over `--bench-dag-days` days
with each of its two policies. For each:
- bound: max(critical path, total work / slots) (partition_assets_tests/support/simulated_runs.py); its
  tighter form (`Bound.tight`, no schedule is shorter either) is shown beside it;
- core: the scheduling core's makespan on simulated runs that take exactly their work, as
  on a first run (no durations recorded): the scheduler alone, no process;
- whole command: `partition-assets backfill run -f <location> --select '*' --start ...
  --end ... --max-parallel <slots>` as a fresh process on a fresh instance that runs
  nothing else (no slot kept for production runs: `backfill_only_instance_env`), of each
  kind `--instances` names (engine_command.INSTANCES: Dagster's defaults, this repo's
  dagster.yaml, Postgres), process start -> exit (bench/engine_command.py), and its split:
  start-up (-> first node run started), nodes (-> last node run ended), gate and publish
  (-> `published:` printed), exit; its CPU seconds per node and its publish's seconds;
- ratio: whole command / bound. Goals (issue 28): every generated shape at most 1.2x, the
  median at most 1.1x;
- served (this repo's instance): the same command (on another fresh instance) taken by a command server of that
  instance (`partition-assets backfill serve`, started and listening before the command): the
  command's process hands it over and a fork of the server, with Dagster and the engine
  imported, runs it; process start -> exit, its split and its ratio;
- warm launch (this repo's instance): the same shape launched from the webserver (the `launchPartitionBackfill`
  mutation of *Materialize range*) onto its warm standby coordinator, which imported Dagster,
  the engine and the location and started its workers before the launch (bench/warm_launch.py):
  launch -> the backfill's final status written, and its ratio to the bound.

Usage: python bench/generated_shapes_bench.py [--seeds 0 1 ... 11] [--slots 4] [--bench-dag-days 31]
           [--instances defaults repo postgres] (or postgres-storage) [--skip-served] [--skip-warm]
           [--out bench/results/shapes_generated.md]

Not guaranteed: the machine is not quiet (the load averages are recorded with each figure);
a shape's ratio moves by a few hundredths between runs.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

# This checkout's package and bench modules, even when the installed package is another work tree's.
sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).resolve().parents[1])]
import dagster_backfill
import engine_bench
import node_overhead
import warm_launch
from engine_command import (
    INSTANCES,
    ON_POSTGRES,
    CommandResult,
    backfill_only_instance_env,
    command_env,
    run_backfill_command,
)

from bench.dag_shapes import SEED_ENV, definitions, generate
from partition_assets.backfill.planning.graph import BackfillGraph
from partition_assets.backfill.running.scheduling import Throttle
from partition_assets_tests.support.command_servers import command_server
from partition_assets_tests.support.postgres import PostgresServer
from partition_assets_tests.support.simulated_runs import Bound, Work, makespan_bound, simulate

REPO = Path(__file__).resolve().parents[1]
LOCATION = str(REPO / "bench/shape_location.py")
GOALS = {"worst": 1.2, "median": 1.1}
# Runs node_overhead.py times to measure what a run costs beyond its work (its median).
RUN_COST_NODES = 40


@dataclass
class Measured:
    name: str
    nodes: int
    bound: Bound
    core: float  # simulated seconds
    command: CommandResult
    probe: float  # host_probe() just before the command
    floor: float  # dagster_floor(): what Dagster's own costs leave as the best whole command
    served: CommandResult | None = None  # the same command, run by a command server (`backfill serve`)
    warm: warm_launch.WarmLaunch | None = None  # launched from the webserver onto its warm standby

    @property
    def ratio(self) -> float:
        return self.command.seconds / self.bound.classic

    @property
    def served_ratio(self) -> float | None:
        return self.served.seconds / self.bound.classic if self.served else None

    @property
    def warm_ratio(self) -> float | None:
        done = self.warm.completed_after if self.warm else None
        return done / self.bound.classic if done is not None else None

    @property
    def floor_ratio(self) -> float:
        return self.floor / self.bound.classic

    def row(self) -> str:
        split = self.command.split()
        return (
            f"| {self.name} | {self.nodes} / {self.command.runs} | {self.bound.classic:.1f} "
            f"({self.bound.tight:.1f}) | {self.core:.1f} | {self.command.seconds:.1f} | "
            f"{split.cells() if split else 'n/a'} | {self.ratio:.2f}x | {self.command.cpu_per_node(self.nodes)} | "
            f"{self.command.publish_cell()} | {self.floor:.1f} ({self.floor_ratio:.2f}x) | "
            f"{self.command.seconds - self.floor:.1f} | {self.served_cells()} | {self.warm_cells()} | "
            f"{self.command.details()}; host probe {self.probe:.2f} s"
            f"{f'; served: {self.served.details()}' if self.served else ''}"
            f"{f'; warm launch: {self.warm.details()}' if self.warm else ''} |"
        )

    def served_cells(self) -> str:
        """`seconds (start-up / nodes / gate+publish / exit) | ratio` of the served command."""
        if self.served is None:
            return "not measured | n/a"
        split = self.served.split()
        return f"{self.served.seconds:.1f} ({split.cells() if split else 'n/a'}) | {self.served_ratio:.2f}x"

    def warm_cells(self) -> str:
        """`seconds (start-up / nodes / gate+publish) | ratio` of the warm launch, for a results table."""
        if self.warm is None:
            return "not measured | n/a"
        done = self.warm.completed_after
        seconds = f"{done:.1f}" if done is not None else "no end"
        return f"{seconds} ({self.warm.split()}) | {f'{self.warm_ratio:.2f}x' if self.warm_ratio else 'n/a'}"


def host_probe() -> float:
    """Seconds a fresh `python -c "import dagster"` takes, the best of 3: how fast this host
    runs Python at the moment. A command's start-up is mostly such an import, and a shared
    host's speed moves from minute to minute: a row's probe tells a slow start-up from a
    slow host."""
    seconds = []
    for _ in range(3):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import dagster"], check=True)
        seconds.append(time.perf_counter() - started)
    return min(seconds)


def dagster_run_cost(slots: int, log) -> float:
    """The median seconds a Dagster run costs a warm worker beyond its asset's work, `slots`
    workers side by side on the repo's instance (bench/node_overhead.py, `RUN_COST_NODES`
    single-partition runs), measured now: creating the run, its events, its captured logs."""
    cost = node_overhead.measure("repo", RUN_COST_NODES, slots)["median"]
    log(f"a Dagster run costs a warm worker {cost * 1000:.0f} ms beyond its work (median of {RUN_COST_NODES})")
    return cost


def dagster_floor(graph: BackfillGraph, slots: int, work: Work, runs: int, run_cost: float, probe: float) -> float:
    """The shortest whole command Dagster's own costs allow, whatever the engine does: a fresh
    `import dagster` (`probe`), then the bound of the graph whose nodes each also take their
    share of `run_cost` per run (the command's `runs`, spread over its nodes). It leaves out
    the rest of a start-up (opening the instance, loading the code location, planning) and the
    publish. Not a strict lower bound: `run_cost` is a median, so a command whose runs all cost
    less than it could end sooner."""
    per_node = run_cost * runs / graph.node_count()
    return probe + makespan_bound(graph, slots, lambda node: work(node) + per_node).classic


def measure_shape(
    seed: int, slots: int, run_cost: float, served: bool, warm: bool, log, instance: str = "repo", new_database=None
) -> Measured:
    """Seed `seed`'s shape on a fresh instance of kind `instance` (Postgres: a database from
    `new_database()`), and with `served` and `warm` the same on a command server and from the
    webserver (this repo's instance only: the webserver's engine needs its instance class)."""
    shape = generate(seed)
    graph = shape.graph()
    log(f"{shape.describe()}: {graph.node_count()} nodes, on {INSTANCES[instance]}")
    probe = host_probe()
    url = new_database() if instance in ON_POSTGRES else None
    command = run_shape_command(seed, shape, slots, served=False, log=log, instance=instance, postgres_url=url)
    served_command = run_shape_command(seed, shape, slots, served=True, log=log) if served else None
    core = simulate(graph, Throttle(slots), shape.work).makespan
    bound = makespan_bound(graph, slots, shape.work)
    floor = dagster_floor(graph, slots, shape.work, command.node_runs, run_cost, probe)
    launched = warm_launch.measure_warm_launch(seed, shape, slots, log) if warm else None
    return Measured(shape.describe(), graph.node_count(), bound, core, command, probe, floor, served_command, launched)


def run_shape_command(
    seed: int, shape, slots: int, served: bool, log, instance: str = "repo", postgres_url: str | None = None
) -> CommandResult:
    """The shape's `backfill run` on a fresh instance of kind `instance`, in a process of its
    own or, `served`, taken by a command server of that instance started (and listening) before it."""
    home = Path(tempfile.mkdtemp(prefix="generated-shapes-bench-"))
    try:
        env = {**backfill_only_instance_env(home / "dagster_home", instance, postgres_url), SEED_ENV: str(seed)}
        args = (
            ["-f", LOCATION],
            ["--select", "*", *shape.range_args(), "--max-parallel", str(slots)],
            env,
            dagster_backfill.planned_keys(definitions(shape), shape.days),
            log,
            instance,
        )
        if not served:
            return run_backfill_command(*args)
        with command_server(command_env(env)) as server:
            result = run_backfill_command(*args)
            if len(server.forks()) != 1:
                raise RuntimeError(f"the command server did not take the command: {server.lines}")
            return result
    finally:
        shutil.rmtree(home, ignore_errors=True)


def measure_bench_dag(
    days: int, slots: int, policy: str, run_cost: float, log, instance: str = "repo", new_database=None
) -> Measured:
    graph = engine_bench.dag_graph(days)
    log(
        f"bench DAG, {days} days, {engine_bench.POLICIES[policy]}, on {INSTANCES[instance]}: {graph.node_count()} nodes"
    )
    probe = host_probe()
    url = new_database() if instance in ON_POSTGRES else None
    command = CommandResult(**engine_bench.measure_command(days, slots, policy, log, instance, url))
    core = simulate(graph, Throttle(slots), engine_bench.work).makespan
    name = f"bench DAG (bench/engine_dag.py), {days} days, {engine_bench.POLICIES[policy]}"
    bound = makespan_bound(graph, slots, engine_bench.work)
    floor = dagster_floor(graph, slots, engine_bench.work, command.node_runs, run_cost, probe)
    return Measured(name, graph.node_count(), bound, core, command, probe, floor)


def why_above(measured: Measured) -> str:
    """A sentence on a shape above the goal: where its seconds beyond the bound went, by its split."""
    split = measured.command.split()
    if split is None:
        return f"- {measured.name}: {measured.ratio:.2f}x; no split (the command did not publish)."
    fixed = split.start_up + split.gate_and_publish + split.exit
    return (
        f"- {measured.name}: {measured.ratio:.2f}x. Its node phase took {split.nodes:.1f} s "
        f"({split.nodes / measured.bound.classic:.2f}x the bound; the core alone, simulated, "
        f"{measured.core / measured.bound.classic:.2f}x), the phases around it {fixed:.1f} s "
        f"(start-up {split.start_up:.1f}, gate and publish {split.gate_and_publish:.1f}, exit {split.exit:.1f}); "
        f"the host probe before it took {measured.probe:.2f} s. Dagster's floor for it is {measured.floor:.1f} s "
        f"({measured.floor_ratio:.2f}x): the engine's own share is {measured.command.seconds - measured.floor:.1f} s."
    )


def verdict(what: str, ratios: list[float | None], shapes: int) -> list[str]:
    """The worst and median of `ratios` (None: not measured) against the goals, as a results
    paragraph on `what` ([] when none was measured)."""
    ratios = [ratio for ratio in ratios if ratio is not None]
    if not ratios:
        return []
    worst, median = max(ratios), statistics.median(ratios)
    return [
        f"**{what}: worst {worst:.2f}x (goal <= {GOALS['worst']}x: "
        f"{'met' if worst <= GOALS['worst'] else 'not met'}); median {median:.2f}x (goal <= {GOALS['median']}x: "
        f"{'met' if median <= GOALS['median'] else 'not met'}), {len(ratios)} of {shapes} shapes.**",
        "",
    ]


HEADER = [
    "| shape | nodes / runs | bound s (tight) | core simulated s | whole command s | "
    "start-up / nodes / gate+publish / exit s | ratio | CPU s per node | publish s | Dagster's floor s (ratio) | "
    "engine's own s | served s (start-up / nodes / gate+publish / exit) | served ratio | "
    "warm launch s (start-up / nodes / gate+publish) | warm ratio | details |",
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
]


def section(instance: str, shapes: list[Measured], bench_dag: list[Measured]) -> list[str]:
    """The results on one instance (engine_command.INSTANCES): its shapes' table and verdicts,
    why each shape above the goal is, what failed, and the bench DAG's rows."""
    ratios = [m.ratio for m in shapes]
    worst, median = max(ratios), statistics.median(ratios)
    floor_median = statistics.median(m.floor_ratio for m in shapes)
    own_median = statistics.median(m.command.seconds - m.floor for m in shapes)
    cpu = [m.command.cpu_seconds / m.nodes for m in shapes if m.command.cpu_seconds is not None]
    publish = [m.command.publish_seconds for m in shapes if m.command.publish_seconds is not None]
    above = [m for m in shapes if m.ratio > GOALS["worst"]]
    failed = [m.name for m in shapes + bench_dag if not m.command.all_succeeded]
    failed += [f"{m.name} (served)" for m in shapes if m.served and not m.served.all_succeeded]
    failed += [f"{m.name} (warm launch)" for m in shapes if m.warm and not m.warm.all_succeeded]
    lines = [
        f"## Generated shapes on {INSTANCES[instance]}",
        "",
        *HEADER,
        *(m.row() for m in shapes),
        "",
        f"**{INSTANCES[instance]}: worst ratio {worst:.2f}x (goal <= {GOALS['worst']}x: "
        f"{'met' if not above else 'not met'}); median {median:.2f}x (goal <= {GOALS['median']}x: "
        f"{'met' if median <= GOALS['median'] else 'not met'}). Dagster's floor: median {floor_median:.2f}x; the "
        f"engine's own share: median {own_median:.1f} s."
        + (f" CPU per node: median {statistics.median(cpu):.3f} s." if cpu else "")
        + (f" Publish: median {statistics.median(publish):.2f} s, worst {max(publish):.2f} s." if publish else "")
        + "**",
        "",
        *verdict("Served by a command server", [m.served_ratio for m in shapes], len(shapes)),
        *verdict("Warm launch from the webserver", [m.warm_ratio for m in shapes], len(shapes)),
    ]
    lines += [why_above(m) for m in above]
    if above:
        lines.append("")
    if failed:
        lines += [f"Commands that did not succeed: {', '.join(failed)}.", ""]
    if bench_dag:
        lines += [f"### The bench DAG on {INSTANCES[instance]}", "", *HEADER, *(m.row() for m in bench_dag), ""]
    return lines


def report(
    shapes: dict[str, list[Measured]],
    bench_dag: dict[str, list[Measured]],
    args,
    uptime: tuple[str, str],
    run_cost: float,
) -> list[str]:
    lines = [
        "# Generated DAG shapes: the whole `backfill run` command against the bound",
        "",
        f"Command: `{' '.join(['python bench/generated_shapes_bench.py', *sys.argv[1:]])}` (`make bench` runs it "
        "with the defaults: seeds 0-11, 4 slots, the bench DAG at 31 days, on Dagster's defaults, this repo's "
        "dagster.yaml and Postgres)",
        "",
        f"Machine: {os.cpu_count()} cores, shared with other work; `uptime` before: `{uptime[0]}`; after: "
        f"`{uptime[1]}`. Load averages per command are in the details (1/5/15 min).",
        "",
        "Each shape: `partition-assets backfill run -f bench/shape_location.py --select '*' --start 2024-01-01 "
        f"--end <its last day> --max-parallel {args.slots}` with DAG_SHAPE_SEED=<seed>, a fresh process on a fresh "
        "instance that runs nothing else, of each kind measured: Dagster's defaults (no dagster.yaml: a SQLite "
        "database per run), this repo's dagster.yaml (`reserve_runs: 0`: every slot for the backfill) and "
        "Postgres (this repo's dagster.yaml plus README's storage block, a local throwaway server with fsync "
        "off); process start -> exit; every node sleeps its asset's work per partition and stores "
        "nothing (a staged backfill with no table to publish). Bound: max(critical path, total work / slots); "
        "in brackets its tight form, which also counts the work every node's ancestors and descendants need "
        "(no schedule is shorter than either). Core simulated: the scheduling core alone on runs that take "
        "exactly their work, no durations recorded "
        "(partition_assets_tests/unit/test_scheduling_shapes.py holds it within 1.05x of the bound). "
        "Split: start-up (-> first node run started), nodes (-> last node run ended), "
        "gate and publish (-> `published:` printed), exit. Ratio: whole command / bound. CPU per node: user + "
        "system seconds of the command and the processes it waited for (its workers), over the nodes: what the "
        "machine's other load barely moves. Publish: the seconds its `published:` line prints. Host probe: a "
        'fresh `python -c "import dagster"` just before the command, best of 3 (a command\'s start-up is '
        "mostly such an import, and this shared host's speed moves from minute to minute). Dagster's floor: "
        "the host probe plus the bound of the graph whose nodes also take their share of what a Dagster run "
        f"costs a warm worker beyond its work on this repo's instance ({run_cost * 1000:.0f} ms, the median of "
        f"{RUN_COST_NODES} runs on {args.slots} workers measured before the shapes, bench/node_overhead.py) for "
        "each run the command made: the engine ends sooner only with runs cheaper than that median. Engine's "
        "own: whole command - floor. "
        "Served (this repo's instance): the same command on another fresh instance, taken by a command server "
        "of that instance (`partition-assets backfill serve`, listening before the command starts): the "
        "command's process hands over its arguments, environment and output, and a fork of the server (Dagster "
        "and the engine imported) runs it; process start -> exit, split as above. "
        "Warm launch (this repo's instance): the same shape launched from the webserver, as *Materialize "
        "range* launches it (the `launchPartitionBackfill` mutation), to a `dagster dev` on a fresh SQLite "
        "instance whose UI backfills of the location run on the engine (`reserve_runs: 0`), once its standby "
        "coordinator had imported Dagster, the engine and the location and started its workers; timed from "
        "just before the mutation to the end time the coordinator writes on the backfill after its gate and "
        "publish (bench/warm_launch.py); split: start-up (-> first node run started), nodes, gate and publish. "
        "Warm ratio: warm launch / bound.",
        "",
    ]
    for instance in shapes:
        lines += section(instance, shapes[instance], bench_dag.get(instance, []))
    return lines


# Those `make bench` measures the shapes on (issue 44's); postgres-storage (issue 54) is measured
# on the bench DAG by engine_bench.py, and here when named.
DEFAULT_INSTANCES = ("defaults", "repo", "postgres")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(12)))
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--bench-dag-days", type=int, default=31, help="0: leave the bench DAG out")
    parser.add_argument(
        "--instances",
        nargs="+",
        choices=list(INSTANCES),
        default=list(DEFAULT_INSTANCES),
        help="the instances measured",
    )
    parser.add_argument("--skip-served", action="store_true", help="leave out the commands run by a command server")
    parser.add_argument("--skip-warm", action="store_true", help="leave out the warm launches from the webserver")
    parser.add_argument("--out", default=str(REPO / "bench/results/shapes_generated.md"))
    args = parser.parse_args()

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    before = _uptime()
    run_cost = dagster_run_cost(args.slots, log)
    days = args.bench_dag_days
    shapes: dict[str, list[Measured]] = {}
    bench_dag: dict[str, list[Measured]] = {}
    with ExitStack() as stack:  # the Postgres server, if one is measured
        server = stack.enter_context(PostgresServer()) if ON_POSTGRES & set(args.instances) else None
        new_database = server.create_database if server else None
        for instance in args.instances:
            on_repo = instance == "repo"
            shapes[instance] = [
                measure_shape(
                    seed,
                    args.slots,
                    run_cost,
                    on_repo and not args.skip_served,
                    on_repo and not args.skip_warm,
                    log,
                    instance,
                    new_database,
                )
                for seed in args.seeds
            ]
            bench_dag[instance] = [
                measure_bench_dag(days, args.slots, policy, run_cost, log, instance, new_database)
                for policy in (engine_bench.POLICIES if days else ())
            ]
    lines = report(shapes, bench_dag, args, (before, _uptime()), run_cost)
    Path(args.out).write_text("\n".join(lines))
    print("\n".join(lines))


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


if __name__ == "__main__":
    main()
