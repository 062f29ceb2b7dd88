"""The sparse engine against the bound, the level-by-level loop and Dagster's own daemon backfills.

DAG (bench/engine_dag.py): raw -> clean -> 7-day rolling; a self-dependent running
total; a monthly fan-in; 0.5-1 s of simulated work per partition; 4 slots.
- bound: max(critical-path work, total work / slots);
- sparse: this engine, each node starting when its own upstream nodes are done;
- level-by-level: every partition of one asset before the next asset starts;
- the engine's three rows on the default SQLite instance and on PostgreSQL (a throwaway
  server, partition_assets_tests/support/postgres.py, with the README's Postgres configuration);
- whole command: `partition-assets backfill run -f bench/engine_dag.py --select '*'` as a
  fresh process on a fresh instance of each kind (engine_command.INSTANCES: Dagster's
  defaults with no dagster.yaml, this repo's dagster.yaml, and Postgres through README's
  storage block), timed from process start to exit (planning and worker start-up included),
  with the assets' default policy (one partition per run) and with range-capable ones
  (BackfillPolicy.single_run()), plus command start -> first node run started, the CPU
  seconds per node of the command and its processes, and the publish's seconds
  (bench/engine_command.py); each against the simulated bound and against its same-run
  bound (`same_run_bound`: the bound over the runs it launched, from their own step times in
  that run's instance, so that the ratio does not depend on the machine's speed or load; a
  range run is one unit, and the runs are checked to be the policy's);
- Dagster daemon: Dagster's own asset backfill (launchPartitionBackfill through the
  webserver, run by the backfill daemon, runs dequeued by the run queue with `slots`
  concurrent runs), with the default policy (one run per partition) and with
  BackfillPolicy.single_run() (bench/dagster_backfill.py).

Usage: python bench/engine_bench.py [--days 31 90] [--slots 4] [--instance sqlite postgres]
           [--command-instances defaults repo postgres postgres-storage] [--repeat 3] [--repeat-days 31]
           [--dagster both|none|single_run|skip] [--dagster-timeout 1800]
           [--reuse-dagster] [--skip-engine] [--only-command] [--out bench/results/engine.md]

--dagster chooses which Dagster policies are measured now; with --reuse-dagster the
others are taken from the last saved measurement (bench/results/engine.json) and
marked with the time they were measured. --skip-engine likewise reuses the engine's, and
--instance measures the engine on those instances only (the others' rows are reused), and
--command-instances the whole command.
--only-command measures only the whole-command rows: the in-process engine rows are reused
and no Dagster policy is measured (add --reuse-dagster to show the saved Dagster rows).
--repeat N measures each whole-command row N times at the sizes --repeat-days names (31 by
default, the issue's size) and reports the run of median ratio to its same-run bound, with
every run's figures in the details (once at other sizes).
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from contextlib import ExitStack
from dataclasses import asdict, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

# This checkout's package and bench modules, even when the installed package is another work tree's.
sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).resolve().parents[1])]
import dagster as dg
import dagster_backfill
import engine_dag
from engine_command import (
    INSTANCES,
    ON_POSTGRES,
    CommandResult,
    backfill_only_instance_env,
    range_args,
    run_backfill_command,
)

from partition_assets.backfill.model import Node, RunUnit
from partition_assets.backfill.planning.graph import build_graph
from partition_assets.backfill.planning.policy_runs import policy_runs
from partition_assets.backfill.planning.spec import TimeRange
from partition_assets.backfill.running.local_workers import DagsterNodeRunner
from partition_assets.backfill.running.loop import execute
from partition_assets.backfill.running.scheduling import Throttle
from partition_assets.run_tags import PARTITION_TAG, RANGE_END_TAG, RANGE_START_TAG
from partition_assets_tests.support.instances import instance_env, open_instance
from partition_assets_tests.support.postgres import PostgresServer
from partition_assets_tests.support.simulated_runs import makespan_bound, runs_bound

REPO = Path(__file__).resolve().parents[1]
DAG_FILE = str(Path(engine_dag.__file__).resolve())
POLICIES = {"none": "default policy (one run per partition)", "single_run": "BackfillPolicy.single_run()"}
GOALS = {"bound": 1.3, "dagster": 4.0, "overhead": 0.5}
# The whole command against its same-run bound (`same_run_bound`), per instance and policy
# (issue 54: the engine on every instance; before it, issues 12 and 44 against the simulated one):
# 1.2x on Dagster's defaults and on Postgres with only README's storage block, 1.15x on this
# repo's dagster.yaml (on SQLite, and on Postgres with the storage block added).
COMMAND_GOALS = {
    "repo": {"none": 1.15, "single_run": 1.15},
    "postgres": {"none": 1.15, "single_run": 1.15},
    "defaults": {"none": 1.2, "single_run": 1.2},
    "postgres-storage": {"none": 1.2, "single_run": 1.2},
}
# How many times `make bench` measures each whole-command row, and at which sizes (issue 54:
# the median of 3 runs at 31 days).
DEFAULT_REPEAT = 3
DEFAULT_REPEAT_DAYS = [31]
# The events that open and close a node's step in its run's event log.
STEP_END_EVENTS = {dg.DagsterEventType.STEP_SUCCESS, dg.DagsterEventType.STEP_FAILURE}
STEP_EVENTS = {dg.DagsterEventType.STEP_START, *STEP_END_EVENTS}
# Enough for the default policy at 31 days (one running_total partition per 30 s daemon tick: ~20 min,
# more on a loaded machine); at 90 days it is cut here and reported as partial.
DEFAULT_DAGSTER_TIMEOUT = 1800
# Where each instance's engine measurement is saved (engine.json) and how its rows are labelled.
ENGINE_KEYS = {"sqlite": "engine", "postgres": "engine_postgres"}
INSTANCE_LABELS = {"sqlite": "", "postgres": ", Postgres instance"}


def work(node) -> float:
    """The simulated work of a node of the bench DAG."""
    return engine_dag.work_seconds(node.asset.to_user_string(), node.partition)


def dag_graph(days: int, policy: str | None = None):
    """The bench DAG's backfill graph: every asset over `days` days from 2024-01-01, its assets'
    BackfillPolicy the one ENGINE_DAG_BACKFILL_POLICY=`policy` gives them (this process's when None)."""
    start = datetime(2024, 1, 1, tzinfo=UTC)
    defs = engine_dag.definitions(engine_dag.POLICIES[policy]) if policy else engine_dag.defs
    asset_graph = defs.resolve_asset_graph()
    return build_graph(asset_graph, asset_graph.get_all_asset_keys(), TimeRange(start, start + timedelta(days=days)))


def run(graph, runner, slots, results, batch_chains=True) -> None:
    execute(graph, runner.launch, Throttle(slots), on_result=results.append, batch_chains=batch_chains)


def run_overheads(results) -> list[float]:
    """Each run's wall time minus the simulated work of the partitions it covered."""
    runs = {}
    for r in results:
        wall, simulated = runs.get(r.run_id, (r.ended - r.started, 0.0))
        runs[r.run_id] = (wall, simulated + work(r.node))
    return [wall - simulated for wall, simulated in runs.values()]


def planned(days: int, slots: int) -> dict:
    graph = dag_graph(days)
    bound = makespan_bound(graph, slots, work)
    return {
        "nodes": graph.node_count(),
        "edges": graph.edge_count(),
        "bound": bound.classic,
        "critical": bound.critical,
    }


def measure_engine(days: int, slots: int, postgres_url: str | None = None) -> dict:
    """Our sparse engine and the level-by-level loop on the same warm workers, on a fresh
    SQLite instance or, given `postgres_url`, a Postgres one."""
    load_before = os.getloadavg()
    home = Path(tempfile.mkdtemp(prefix="engine-bench-"))
    os.environ.update(instance_env(home, postgres_url))
    start = datetime(2024, 1, 1, tzinfo=UTC)
    window = TimeRange(start, start + timedelta(days=days))
    asset_graph = engine_dag.defs.resolve_asset_graph()
    graph = dag_graph(days)

    sparse_results = []
    with (
        dg.DagsterInstance.get() as instance,
        DagsterNodeRunner(DAG_FILE, slots, {"bench": "sparse"}, instance) as runner,
    ):
        first = next(iter(graph.nodes()))
        runner.launch(RunUnit(first.asset, (first.partition,))).result()  # workers warm: code loaded
        sparse_results.clear()
        began = time.perf_counter()
        run(graph, runner, slots, sparse_results)
        sparse = time.perf_counter() - began

        unbatched_results = []
        began = time.perf_counter()
        run(graph, runner, slots, unbatched_results, batch_chains=False)
        unbatched = time.perf_counter() - began

        level_results = []
        began = time.perf_counter()
        for key in graph.slices:  # topological order: each level waits for the whole previous one
            run(build_graph(asset_graph, [key], window), runner, slots, level_results)
        levels = time.perf_counter() - began
    shutil.rmtree(home, ignore_errors=True)

    overheads = run_overheads(sparse_results)
    return {
        "sparse": sparse,
        "levels": levels,
        "unbatched": unbatched,
        "runs": len(overheads),
        "unbatched_overhead": statistics.median(run_overheads(unbatched_results)),
        "overhead": statistics.median(overheads),
        "measured_at": _now(),
        "load_before": load_before,
        "load_after": os.getloadavg(),
    }


def measure_command(
    days: int, slots: int, policy: str, log, instance: str = "repo", postgres_url: str | None = None
) -> dict:
    """The whole `backfill run` command over `days` days with ENGINE_DAG_BACKFILL_POLICY=`policy`,
    on a fresh instance of kind `instance` (engine_command.INSTANCES; Postgres on `postgres_url`)
    that runs nothing else (all `slots` free for the backfill)."""
    home = Path(tempfile.mkdtemp(prefix="engine-bench-command-"))
    try:
        env = backfill_only_instance_env(home / "dagster_home", instance, postgres_url)
        result = run_backfill_command(
            ["-f", DAG_FILE],
            ["--select", "*", *range_args(days), "--max-parallel", str(slots)],
            {**env, "ENGINE_DAG_BACKFILL_POLICY": policy},
            dagster_backfill.planned_keys(engine_dag.defs, days),
            log,
            instance,
        )
        result = replace(result, same_run_bound=same_run_bound(env, days, slots, policy))
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return asdict(result)


def median_of(results: list[dict]) -> dict:
    """The run of median ratio among `results` (measure_command's, of one row), against each
    one's same-run bound (its seconds when it has none), with every run's figures in its
    `repeats`; for an even count, the lower of the two middle runs."""

    def ratio(result: dict) -> float:
        bound = result["same_run_bound"]
        return result["seconds"] / bound["bound"] if bound else result["seconds"]

    ranked = sorted(results, key=ratio)
    repeats = [
        {
            "seconds": r["seconds"],
            "bound": r["same_run_bound"]["bound"] if r["same_run_bound"] else None,
            "cpu_seconds": r["cpu_seconds"],
        }
        for r in results
    ]
    return {**ranked[(len(ranked) - 1) // 2], "repeats": repeats}


def run_step_seconds(env: dict[str, str], days: int) -> dict[RunUnit, float]:
    """The node runs of the command that ran the bench DAG over `days` days in the instance `env`
    names, each with its step seconds: from its STEP_START event to the step's end (success or
    failure). A run of a range of partitions (a range-capable policy) is one unit of them: it ran
    them in one step. Runs that never stepped are absent; runs of no single asset of the DAG (the
    publish's) are ignored."""
    graph = dag_graph(days)
    runs: dict[RunUnit, float] = {}
    with open_instance(env) as instance:
        for record in instance.get_run_records():
            run = record.dagster_run
            selection = run.asset_selection or frozenset()
            asset = next(iter(selection)) if len(selection) == 1 else None
            if asset not in graph.slices:
                continue
            times = {e.dagster_event_type: e.timestamp for e in instance.all_logs(run.run_id, of_type=STEP_EVENTS)}
            ends = [times[event] for event in STEP_END_EVENTS if event in times]
            if dg.DagsterEventType.STEP_START not in times or not ends:
                continue
            keys = graph.slices[asset].partition_keys
            if PARTITION_TAG in run.tags:
                covered = [run.tags[PARTITION_TAG]]
            else:
                covered = keys[keys.index(run.tags[RANGE_START_TAG]) : keys.index(run.tags[RANGE_END_TAG]) + 1]
            runs[RunUnit(asset, tuple(covered))] = ends[0] - times[dg.DagsterEventType.STEP_START]
    return runs


def node_step_seconds(runs: dict[RunUnit, float]) -> dict[Node, float]:
    """Each node's share of its run's step seconds (`run_step_seconds`): a range run's seconds
    split over its partitions in proportion to their simulated work, a run of one node's all its own."""
    seconds: dict[Node, float] = {}
    for unit, step in runs.items():
        simulated = sum(map(work, unit.nodes))
        seconds.update({node: step * (work(node) / simulated) for node in unit.nodes})
    return seconds


def check_policy_runs(graph, launched: Iterable[RunUnit], policy: str) -> None:
    """Refuses runs a command `launched` that are not the runs its assets' BackfillPolicy makes
    of `graph` (the plan under ENGINE_DAG_BACKFILL_POLICY=`policy`): Dagster's rule
    (`policy_runs`), per asset its contiguous targeted partitions in ranges of at most
    max_partitions_per_run, one partition per run without a policy. Only over those runs is the
    bound over the runs (`runs_bound`) the policy's bound: a finer split would lower it.

    Raises:
        RuntimeError: the launched runs differ from the policy's, in number or in split.
    """
    expected = {unit for asset_slice in graph.slices.values() for unit in policy_runs(asset_slice)}
    launched = set(launched)
    if launched == expected:
        return

    def shown(units: set[RunUnit]) -> str:
        ranges = sorted(f"{u.asset.to_user_string()}[{u.partitions[0]}..{u.partitions[-1]}]" for u in units)
        return ", ".join(ranges[:4]) + (f" and {len(ranges) - 4} more" if len(ranges) > 4 else "")

    raise RuntimeError(
        f"the command launched {len(launched)} node runs where {POLICIES[policy]} makes {len(expected)} "
        f"(launched, not the policy's: {shown(launched - expected) or 'none'}; the policy's, not launched: "
        f"{shown(expected - launched) or 'none'}): the bound over its runs would not be the policy's bound; "
        "make the engine launch the policy's runs (`backfill run --batching policy`) before measuring"
    )


def same_run_bound(env: dict[str, str], days: int, slots: int, policy: str) -> dict[str, float] | None:
    """The bound of the command that just ran on `env`'s instance with ENGINE_DAG_BACKFILL_POLICY=
    `policy`, from its runs' own step seconds (`run_step_seconds`) rather than their simulated
    work: over the runs it launched, once checked to be the policy's (`check_policy_runs`), each
    run one unit on one slot after the runs holding its upstream nodes (`runs_bound`):
    max(critical path of the runs, their step seconds / `slots`). With one run per partition it
    is the node-level bound; a range run steps through all its partitions on one slot and its
    downstream runs start when it ends, so no schedule honouring the policy beats it. As
    {"bound", "critical", "work", "runs"} with the node-level bound beside it ("node_bound",
    "node_critical": every node alone, a range run's seconds split by `node_step_seconds`); None
    when a node has no step time (it never ran). The machine's speed and load lengthen the steps
    as they do the command, so the command's ratio to it is the engine's own overhead.

    Raises:
        RuntimeError: the launched runs are not the policy's (`check_policy_runs`).
    """
    runs = run_step_seconds(env, days)
    seconds = node_step_seconds(runs)
    graph = dag_graph(days, policy)
    if any(node not in seconds for node in graph.nodes()):
        return None
    check_policy_runs(graph, runs, policy)
    bound = runs_bound(graph, runs, slots)
    nodes = makespan_bound(graph, slots, seconds.__getitem__)
    return {
        "bound": bound.classic,
        "critical": bound.critical,
        "work": sum(runs.values()),
        "runs": len(runs),
        "node_bound": nodes.classic,
        "node_critical": nodes.critical,
    }


def commands_by_instance(saved: dict) -> dict[str, dict[str, dict]]:
    """The saved whole-command results {instance: {policy: result}}; an older measurement saved
    {policy: result}, on this repo's instance."""
    if saved and set(saved) <= set(POLICIES):
        return {"repo": saved}
    return saved


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")


def _load(loads) -> str:
    return "/".join(f"{x:.1f}" for x in loads)


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def engine_rows(engine: dict | None, shape: dict, best: float, label: str) -> list[str]:
    """The engine's rows on one instance (`label` says which; empty for the default)."""
    if not engine:
        return [f"| sparse engine{label} | not measured | | |"]
    return [
        f"| sparse engine{label} | {engine['sparse']:.1f} | {engine['sparse'] / best:.2f}x | "
        f"ended {engine['measured_at']}, load {_load(engine['load_before'])} -> {_load(engine['load_after'])}; "
        f"median overhead {engine['overhead']:.2f} s over {engine['runs']} runs |",
        f"| sparse engine, one run per node (`--no-batch`){label} | {engine['unbatched']:.1f} | "
        f"{engine['unbatched'] / best:.2f}x | {shape['nodes']} runs, median overhead "
        f"{engine['unbatched_overhead']:.2f} s per run |",
        f"| level by level (same workers){label} | {engine['levels']:.1f} | {engine['levels'] / best:.2f}x | |",
    ]


def command_rows(commands: dict[str, dict[str, dict]], best: float, nodes: int, slots: int) -> list[str]:
    """The whole command's row per instance and policy: against the simulated bound `best`, and
    against its same-run bound when measured."""
    rows = []
    for instance, where in INSTANCES.items():
        for policy, label in POLICIES.items():
            name = f"whole command `partition-assets backfill run`, {label}, {where}"
            if policy not in commands.get(instance, {}):
                rows.append(f"| {name} | not measured | | |")
                continue
            command = CommandResult(**commands[instance][policy])
            same_run = command.same_run_bound
            versus = f"{command.seconds / best:.2f}x" + (
                f" (same run: {command.seconds / same_run['bound']:.2f}x)" if same_run else ""
            )
            rows.append(
                f"| {name} | {command.seconds:.1f} | {versus} | {repeats_cell(command, nodes)}"
                f"{same_run_cell(same_run, slots)}CPU {command.cpu_per_node(nodes)} s per node; "
                f"publish {command.publish_cell()} s; {command.details()} |"
            )
    return rows


def repeats_cell(command: CommandResult, nodes: int) -> str:
    """Every run of a row measured more than once (--repeat), for a results table's details
    column ("" for a single run): seconds, ratio to its same-run bound, CPU per node."""
    if len(command.repeats) < 2:
        return ""
    runs = []
    for r in command.repeats:
        ratio = f" = {r['seconds'] / r['bound']:.2f}x" if r["bound"] else ""
        cpu = f", CPU {r['cpu_seconds'] / nodes:.3f} s/node" if r["cpu_seconds"] is not None else ""
        runs.append(f"{r['seconds']:.1f} s{ratio}{cpu}")
    return f"median of {len(runs)} runs ({'; '.join(runs)}), this row the median's; "


def same_run_cell(same_run: dict[str, float] | None, slots: int) -> str:
    """The same-run bound and its terms, and the node-level bound beside it, for a results
    table's details column ("" when not measured; a measurement from before the bound over runs
    has the node-level one only)."""
    if not same_run:
        return ""
    if "runs" not in same_run:
        return (
            f"same-run bound {same_run['bound']:.1f} s = max(critical path {same_run['critical']:.1f} s, "
            f"step work {same_run['work']:.1f} s / {slots}); "
        )
    return (
        f"same-run bound {same_run['bound']:.1f} s over its {same_run['runs']:.0f} node runs = max(critical path "
        f"of runs {same_run['critical']:.1f} s, run step work {same_run['work']:.1f} s / {slots}); node-level "
        f"bound {same_run['node_bound']:.1f} s = max(critical path {same_run['node_critical']:.1f} s, same work "
        f"/ {slots}), as if every node ran alone; "
    )


def command_notes(commands: dict[str, dict[str, dict]], best: float, daemon: dict[str, dict]) -> list[str]:
    """The whole command's goals against its same-run bound per instance (the simulated bound
    `best` for a measurement without one), and its speed-up over Dagster per policy on this
    repo's instance."""
    notes = []
    for instance, where in INSTANCES.items():
        goals = []
        for policy, label in POLICIES.items():
            if policy not in commands.get(instance, {}):
                continue
            command = CommandResult(**commands[instance][policy])
            same_run = command.same_run_bound
            bound, which = (same_run["bound"], "its same-run bound") if same_run else (best, "the simulated bound")
            ratio, goal = command.seconds / bound, COMMAND_GOALS[instance][policy]
            met = "met" if command.all_succeeded and ratio <= goal else "not met"
            failed = "" if command.all_succeeded else ", the command did not succeed"
            median = f", median of {len(command.repeats)} runs" if len(command.repeats) > 1 else ""
            goals.append(f"{label} {ratio:.2f}x {which}{median} (goal <= {goal}x: {met}{failed})")
        if goals:
            notes.append(f"Whole command goals on {where}: {'; '.join(goals)}.")
    speedups = []
    for policy, label in POLICIES.items():
        if policy not in commands.get("repo", {}):
            continue
        command = CommandResult(**commands["repo"][policy])
        d = daemon.get(policy)
        if d and d["finished"]:
            speedups.append(f"{label} {d['makespan'] / command.seconds:.1f}x faster than Dagster's daemon")
        elif d:
            speedups.append(f"{label} more than {d['timeout'] / command.seconds:.1f}x faster (Dagster did not finish)")
    if speedups:
        notes.append(f"Whole command against Dagster with the same policy: {'; '.join(speedups)}.")
    return notes


def report(
    days: int,
    slots: int,
    shape: dict,
    engines: dict[str, dict | None],
    commands: dict[str, dict[str, dict]],
    daemon: dict[str, dict],
) -> list[str]:
    best = shape["bound"]
    rows = [f"| bound: max(critical path {shape['critical']:.1f} s, work / {slots} slots) | {best:.1f} | 1.00x | |"]
    notes = []
    for instance, key in ENGINE_KEYS.items():
        rows += engine_rows(engines.get(key), shape, best, INSTANCE_LABELS[instance])
    rows += command_rows(commands, best, shape["nodes"], slots)
    engine, on_postgres = engines.get("engine"), engines.get("engine_postgres")
    for policy, label in POLICIES.items():
        d = daemon.get(policy)
        if d is None:
            rows.append(f"| Dagster daemon, {label} | not measured | | |")
            continue
        runs = ", ".join(f"{n} {s}" for s, n in sorted(d["run_statuses"].items())) or "none"
        detail = (
            f"{d['runs']} runs ({runs}); backfill {d['status']} after {d['completed_after']:.1f} s"
            if d["finished"]
            else f"did not finish in {d['timeout']:.0f} s: {d['materialized']} of {d['targeted']} partitions "
            f"materialized, {d['runs']} runs ({runs}); canceled"
        )
        if d.get("median_run_overhead") is not None:
            detail += (
                f"; median run {d['median_run_seconds']:.1f} s, of which overhead "
                f"{d['median_run_overhead']:.1f} s; median queue wait {d['median_queue_wait']:.1f} s"
            )
        detail += f"; ended {d['measured_at']}, load {_load(d['load_before'])} -> {_load(d['load_after'])}"
        if d["finished"]:
            rows.append(f"| Dagster daemon, {label} | {d['makespan']:.1f} | {d['makespan'] / best:.2f}x | {detail} |")
        else:
            rows.append(f"| Dagster daemon, {label} | > {d['timeout']:.0f} | > {d['timeout'] / best:.1f}x | {detail} |")

    if engine:
        notes.append(f"Sparse engine is {engine['levels'] / engine['sparse']:.2f}x faster than level by level.")
        finished = {p: d["makespan"] for p, d in daemon.items() if d["finished"]}
        if finished:
            policy = min(finished, key=finished.get)
            dagster_best = finished[policy]
            unfinished = [d["timeout"] for d in daemon.values() if not d["finished"]]
            qualifier = "" if all(t >= dagster_best for t in unfinished) else "at least "
            notes.append(
                f"**Engine is {qualifier}{dagster_best / engine['sparse']:.1f}x faster than Dagster's better "
                f"policy** ({POLICIES[policy]}: {dagster_best:.1f} s)."
            )
        elif daemon:
            timeout = min(d["timeout"] for d in daemon.values())
            notes.append(
                f"**Engine is more than {timeout / engine['sparse']:.1f}x faster than Dagster**: "
                f"no Dagster policy finished within {timeout:.0f} s."
            )
        notes.append(
            f"Per-run overhead (run wall time minus the simulated work of its partitions), median: "
            f"{engine['overhead']:.2f} s over {engine['runs']} runs for {shape['nodes']} nodes; "
            f"batching makes the engine {engine['unbatched'] / engine['sparse']:.2f}x faster "
            "than one run per node."
        )
        ratio = engine["sparse"] / best
        goals = [
            f"makespan {ratio:.2f}x the bound (goal <= {GOALS['bound']}x: "
            f"{'met' if ratio <= GOALS['bound'] else 'not met'})",
            f"overhead {engine['overhead']:.2f} s (goal <= {GOALS['overhead']} s: "
            f"{'met' if engine['overhead'] <= GOALS['overhead'] else 'not met'})",
        ]
        if finished:
            speedup = dagster_best / engine["sparse"]
            goals.insert(
                1,
                f"{speedup:.1f}x faster than Dagster's better policy (goal >= {GOALS['dagster']}x: "
                f"{'met' if speedup >= GOALS['dagster'] else 'not met'})",
            )
        notes.append("Goals: " + "; ".join(goals) + ".")
    notes += command_notes(commands, best, daemon)
    if engine and on_postgres:
        notes.append(
            f"On the Postgres instance: makespan {on_postgres['sparse']:.1f} s "
            f"({on_postgres['sparse'] / engine['sparse']:.2f}x SQLite's), median per-run overhead "
            f"{on_postgres['overhead']:.2f} s (SQLite {engine['overhead']:.2f} s), one run per node "
            f"{on_postgres['unbatched_overhead']:.2f} s per run (SQLite {engine['unbatched_overhead']:.2f} s)."
        )
    return [
        f"## {days} days",
        "",
        f"{shape['nodes']} nodes, {shape['edges']} edges; 0.5-1 s simulated work per node; {slots} slots.",
        "",
        "| schedule | makespan s | vs bound | details |",
        "| --- | --- | --- | --- |",
        *rows,
        "",
        *notes,
        "",
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--days", type=int, nargs="+", default=[31, 90])
    parser.add_argument("--slots", type=int, default=4)
    for option, instances, measured in (
        ("--instance", ENGINE_KEYS, "the engine in process"),
        ("--command-instances", INSTANCES, "the whole command"),
    ):
        parser.add_argument(
            option,
            nargs="+",
            choices=list(instances),
            default=list(instances),
            help=f"the Dagster instances {measured} is measured on (the others' rows are reused)",
        )
    parser.add_argument(
        "--dagster",
        choices=["both", "none", "single_run", "skip"],
        default="both",
        help="which Dagster backfill policies to measure through the daemon",
    )
    parser.add_argument(
        "--dagster-timeout",
        type=float,
        default=DEFAULT_DAGSTER_TIMEOUT,
        help="seconds before an unfinished Dagster backfill is reported as partial and canceled",
    )
    parser.add_argument(
        "--reuse-dagster",
        action="store_true",
        help="report Dagster policies not measured now from the last saved measurement",
    )
    parser.add_argument(
        "--skip-engine", action="store_true", help="do not measure the engine; report its last saved measurement"
    )
    parser.add_argument(
        "--only-command",
        action="store_true",
        help="measure only the whole-command rows; reuse the engine's others, Dagster's with --reuse-dagster",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=DEFAULT_REPEAT,
        help="how many times each whole-command row is measured at --repeat-days (the median run is reported)",
    )
    parser.add_argument(
        "--repeat-days", type=int, nargs="+", default=DEFAULT_REPEAT_DAYS, help="the sizes measured --repeat times"
    )
    parser.add_argument("--out", default=str(REPO / "bench/results/engine.md"))
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error(f"--repeat {args.repeat}: give 1 or more runs per row")
    if args.only_command:
        args.dagster = "skip"
    saved_path = Path(args.out).with_suffix(".json")
    saved = json.loads(saved_path.read_text()) if saved_path.exists() else {}
    policies = {"both": ["single_run", "none"], "skip": []}.get(args.dagster, [args.dagster])

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    uptime_before = _uptime()
    results = {}
    reused = []
    measured = [] if args.skip_engine or args.only_command else args.instance
    with ExitStack() as stack:  # the Postgres server, if one is started
        on_postgres = "postgres" in measured or (
            bool(ON_POSTGRES & set(args.command_instances)) and not args.skip_engine
        )
        server = stack.enter_context(PostgresServer()) if on_postgres else None
        for days in args.days:
            old = saved.get(str(days), {})
            shape = planned(days, args.slots)
            log(f"{days} days: {shape['nodes']} nodes, bound {shape['bound']:.1f} s")
            engines = {}
            for instance, key in ENGINE_KEYS.items():
                if instance not in measured:
                    engines[key] = old.get(key)
                    reused += [f"engine on {instance} at {days} days"] if engines[key] else []
                    continue
                url = server.create_database() if server and instance == "postgres" else None
                engines[key] = engine = measure_engine(days, args.slots, url)
                log(f"  engine on {instance}: sparse {engine['sparse']:.1f} s, level by level {engine['levels']:.1f} s")
            commands = commands_by_instance(old.get("command", {}))
            for instance in INSTANCES:
                if args.skip_engine or instance not in args.command_instances:
                    reused += [f"whole command on {instance} at {days} days"] if commands.get(instance) else []
                    continue
                url = server.create_database if server and instance in ON_POSTGRES else None
                runs = args.repeat if days in args.repeat_days else 1
                commands[instance] = {
                    policy: median_of(
                        [
                            measure_command(days, args.slots, policy, log, instance, url() if url else None)
                            for _ in range(runs)
                        ]
                    )
                    for policy in POLICIES
                }
            daemon = {p: d for p, d in old.get("daemon", {}).items() if args.reuse_dagster and p not in policies}
            reused += [f"Dagster {p} at {days} days" for p in daemon]
            for policy in policies:
                result = dagster_backfill.measure(
                    days, policy, args.slots, args.dagster_timeout, DAG_FILE, progress=log
                )
                daemon[policy] = {**asdict(result), "measured_at": _now()}
            results[str(days)] = {"shape": shape, **engines, "command": commands, "daemon": daemon}
    uptime_after = _uptime()

    saved.update(results)
    # A partial rerun (reusing saved figures) still reports every saved range, e.g. 31 and 90 days.
    shown = sorted(map(int, saved)) if args.skip_engine or args.reuse_dagster or args.only_command else args.days
    reused += [f"all rows at {days} days" for days in shown if str(days) not in results]
    command = " ".join(["python bench/engine_bench.py", *sys.argv[1:]])
    lines = [
        "# Backfill engine: makespan against the bound, the level-by-level loop and Dagster's daemon backfills",
        "",
        f"Command: `{command}` (`make bench` runs it with the defaults: `--days 31 90 --slots 4 --instance sqlite "
        f"postgres --command-instances {' '.join(INSTANCES)} --repeat {DEFAULT_REPEAT} --repeat-days "
        f"{' '.join(map(str, DEFAULT_REPEAT_DAYS))} --dagster both --dagster-timeout {DEFAULT_DAGSTER_TIMEOUT}`)",
        "",
        *(
            [
                f"Some rows were measured by an earlier run ({', '.join(reused)}), see 'ended' in the details; "
                "`make bench` measures every row in one run.",
                "",
            ]
            if reused
            else []
        ),
        f"Machine: {os.cpu_count()} cores, shared with other work; `uptime` before: `{uptime_before}`; "
        f"after: `{uptime_after}`. Load averages per measurement are in the details (1/5/15 min).",
        "",
        "DAG (bench/engine_dag.py): raw -> clean (identity) -> rolling_7d (7-day window); running_total "
        "(self-dependent + identity on clean); monthly_summary (fan-in of clean).",
        "Engine rows: our engine on warm worker processes, every node a Dagster run recorded in the instance "
        "(SQLite, the default; 'Postgres instance': a local throwaway PostgreSQL server). "
        f"Whole-command rows: `partition-assets backfill run -f bench/engine_dag.py --select '*' --start "
        f"2024-01-01 --end <last day> --max-parallel {args.slots}` as a new process on a fresh instance that runs "
        "nothing else, of four kinds: Dagster's defaults (no dagster.yaml: a SQLite database per run), this "
        "repo's dagster.yaml (`reserve_runs: 0`), Postgres (this repo's dagster.yaml plus README's storage "
        "block) and Postgres with only README's storage block (a dagster.yaml of that block alone: Dagster's "
        "defaults otherwise), each Postgres a fresh database on a local throwaway server with fsync off; "
        f"each row measured {args.repeat} times at {', '.join(map(str, args.repeat_days))} days (the run of "
        "median ratio to its same-run bound shown, every run in its details), once at other sizes; "
        "process start -> exit (planning, worker start-up and "
        "publishing included); CPU per node: user + system seconds of the command and the processes it waited "
        "for (its workers), over the nodes, which the machine's other load barely moves; publish: the seconds "
        "its `published:` line prints; vs bound: against the simulated bound and, in parentheses, against the "
        "same-run bound: the bound over the node runs the command launched, from their own step seconds in the "
        "command's instance (each run's STEP_START to its step's end): max(critical path of the runs, their "
        "step work / slots), each run one unit on one slot that starts once every run holding an upstream "
        "node of its nodes has ended (a dependency inside a run is inside its step). With the default policy "
        "every run is one node: the node-level bound. With a range-capable policy a range run steps through "
        "all its partitions on one slot and its downstream runs can only start when it ends (Dagster's rule, "
        "which Dagster's own backfill honours too), so no schedule honouring the policy beats the bound over "
        "its runs; the bench checks that the command launched exactly the runs the policy makes (per asset, "
        "its contiguous partitions in ranges of at most max_partitions_per_run) and refuses to report "
        "otherwise. The node-level bound (every node alone, a range run's step split over its partitions by "
        "their simulated work) is in the details: what the command could reach only by splitting the "
        "policy's ranges. The runs in the details count the publish's run too: BackfillPolicy.single_run() "
        "makes one range run per asset (the month of monthly_summary included), plus that one. Both bounds "
        "are lengthened by the machine's speed and load as the command is: "
        "computed after each command from that run's own records (engine_bench.py `same_run_bound`), never "
        "from the simulated work; the whole-command goals (issue 54: <= 1.2x on Dagster's defaults and on "
        "Postgres with only the storage block, <= 1.15x on this repo's dagster.yaml, on SQLite or Postgres) "
        "are against it; with "
        "ENGINE_DAG_BACKFILL_POLICY=none (Dagster's default: one partition per run) or single_run "
        "(range-capable); its first node run's start is read from the instance's run records. "
        "Dagster rows: stock Dagster 1.13 through `dagster dev` (webserver + daemon), backfill launched with "
        "the `launchPartitionBackfill` mutation the UI's Materialize dialog uses; run queue "
        f"`max_concurrent_runs: {args.slots}`; makespan is launch -> last run's end (the backfill's own status "
        "turns final on the daemon's next 30 s tick, shown in details).",
        "",
    ]
    for days in shown:
        r = saved[str(days)]
        engines = {key: r.get(key) for key in ENGINE_KEYS.values()}
        lines += report(days, args.slots, r["shape"], engines, commands_by_instance(r.get("command", {})), r["daemon"])
    Path(args.out).write_text("\n".join(lines))
    saved_path.write_text(json.dumps(saved, indent=2) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
