"""The engine against real Dagster runs: order, early starts, failure isolation."""

import multiprocessing
import os
import re
import textwrap
import threading
import time
from collections import defaultdict
from datetime import UTC, datetime

import dagster as dg
import pytest

from partition_assets.backfill import commands
from partition_assets.backfill.commands import PrintingConsole, SilentConsole, backfill_status, launching
from partition_assets.backfill.model import BackfillStatus, Node, NodeStatus, RunUnit
from partition_assets.backfill.planning.graph import build_graph
from partition_assets.backfill.planning.spec import BackfillSpec, TimeRange
from partition_assets.backfill.running import local_workers
from partition_assets.backfill.running.durations import recorded_seconds
from partition_assets.backfill.running.local_workers import DagsterNodeRunner
from partition_assets.backfill.running.loop import execute
from partition_assets.backfill.running.runners import node_runner_reusing
from partition_assets.backfill.running.scheduling import Throttle
from partition_assets.backfill.state.record import node_states
from partition_assets.backfill.state.store import BackfillStore
from partition_assets.dagster_instance.lease_proof import proven_backfill
from partition_assets.errors import BackfillPlanError
from partition_assets.run_tags import BACKFILL_ID_TAG, LEASE_PROOF_TAG, RANGE_END_TAG, RANGE_START_TAG
from partition_assets_tests.support.cli_runs import run_cli
from partition_assets_tests.support.instances import also_on_postgres
from partition_assets_tests.support.locations import engine_defs
from partition_assets_tests.support.records import record_at

ENGINE_DEFS = "partition_assets_tests.support.locations.engine_defs"
JANUARY_1_TO_8 = TimeRange(datetime(2024, 1, 1, tzinfo=UTC), datetime(2024, 1, 9, tzinfo=UTC))


def run_backfill(selection, backfill_id, max_parallel=2, done=()):
    asset_graph = engine_defs.defs.resolve_asset_graph()
    graph = build_graph(asset_graph, [dg.AssetKey(a) for a in selection], JANUARY_1_TO_8)
    results = {}
    with (
        dg.DagsterInstance.get() as instance,
        DagsterNodeRunner(
            "partition_assets_tests.support.locations.engine_defs",
            max_parallel,
            {BACKFILL_ID_TAG: backfill_id},
            instance,
        ) as runner,
    ):
        status = execute(
            graph,
            runner.launch,
            Throttle(max_parallel=max_parallel),
            done=done,
            on_result=lambda r: results.__setitem__(r.node, r),
        )
    return graph, status, results


@pytest.mark.slow
@also_on_postgres("home")
def test_nodes_start_after_their_upstream_and_no_later_than_needed(home):
    graph, status, results = run_backfill(["raw", "clean", "rolling", "total", "month"], "bf-order")
    assert set(status.values()) == {NodeStatus.SUCCEEDED}
    for node in graph.nodes():
        for parent in graph.upstream(node):
            if parent != node:
                assert results[node].started >= results[parent].ended, (node, parent)
    # A downstream node starts while unrelated upstream partitions still run.
    clean_first = results[Node(dg.AssetKey("clean"), "2024-01-02")]
    raw_last_end = max(r.ended for n, r in results.items() if n.asset == dg.AssetKey("raw"))
    assert clean_first.started < raw_last_end
    # Every node is a real run in the instance, tagged with the backfill and partition.
    with dg.DagsterInstance.get() as instance:
        runs = instance.get_runs(dg.RunsFilter(tags={BACKFILL_ID_TAG: "bf-order"}))
        assert len(runs) == graph.node_count()
        assert {(r.asset_selection and next(iter(r.asset_selection)), r.tags["dagster/partition"]) for r in runs} == {
            (n.asset, n.partition) for n in graph.nodes()
        }
        # Each proves it is a node run of the backfill (dagster_instance/lease_proof.py): its proof is bound
        # to its own id.
        assert all(proven_backfill(instance, r.run_id, r.tags) == "bf-order" for r in runs)
        assert len({r.tags[LEASE_PROOF_TAG] for r in runs}) == len(runs)
        assert instance.get_materialized_partitions(dg.AssetKey("rolling")) == set(
            graph.slices[dg.AssetKey("rolling")].partition_keys
        )


@pytest.mark.slow
def test_a_failed_node_blocks_exactly_its_descendants(home):
    graph, status, _ = run_backfill(["raw", "flaky", "after_flaky", "clean"], "bf-fail")
    failed = Node(dg.AssetKey("flaky"), engine_defs.FAILING_PARTITION)
    assert status[failed] == NodeStatus.FAILED
    blocked = {n for n, s in status.items() if s == NodeStatus.BLOCKED}
    # after_flaky reads a 2-day window: days 4 and 5 need flaky's day 4.
    assert blocked == {Node(dg.AssetKey("after_flaky"), "2024-01-04"), Node(dg.AssetKey("after_flaky"), "2024-01-05")}
    assert {n for n, s in status.items() if s == NodeStatus.SUCCEEDED} == set(graph.nodes()) - blocked - {failed}


@pytest.mark.slow
@also_on_postgres("home")
def test_a_self_dependent_chain_shares_runs_but_never_outruns_its_inputs(home):
    ledger = dg.AssetKey("ledger")
    graph, status, results = run_backfill(["raw", "clean", "ledger"], "bf-chain")
    assert set(status.values()) == {NodeStatus.SUCCEEDED}
    runs = defaultdict(list)
    for node, result in results.items():
        if node.asset == ledger:
            runs[result.run_id].append(node)
    # Every member of a shared run had all its other inputs finished before the run began.
    for members in runs.values():
        began = results[members[0]].started
        for member in members:
            for parent in graph.upstream(member):
                if parent not in members:
                    assert results[parent].ended <= began, (member, parent)
    with dg.DagsterInstance.get() as instance:
        assert instance.get_materialized_partitions(ledger) == set(graph.slices[ledger].partition_keys)
        # A range run stands for each of its nodes in the backfill's record.
        states = node_states(instance, "bf-chain", graph)
        assert {
            node for node, (state, _) in states.items() if node.asset == ledger and state == NodeStatus.SUCCEEDED
        } == set(n for n in graph.nodes() if n.asset == ledger)


@pytest.mark.slow
def test_a_chain_whose_inputs_are_done_runs_as_one_range_run(home):
    ledger = dg.AssetKey("ledger")
    graph, status, results = run_backfill(
        ["raw", "clean", "ledger"],
        "bf-ready-chain",
        done=[
            node
            for node in build_graph(
                engine_defs.defs.resolve_asset_graph(), [dg.AssetKey("raw"), dg.AssetKey("clean")], JANUARY_1_TO_8
            ).nodes()
        ],
    )
    assert {n.asset for n in results} == {ledger}
    assert len({r.run_id for r in results.values()}) == 1
    with dg.DagsterInstance.get() as instance:
        run = instance.get_run_by_id(next(iter(results.values())).run_id)
        assert (run.tags[RANGE_START_TAG], run.tags[RANGE_END_TAG]) == ("2024-01-01", "2024-01-08")
        assert instance.get_materialized_partitions(ledger) == set(graph.slices[ledger].partition_keys)


@pytest.mark.slow
def test_ready_nodes_share_runs_only_while_they_would_wait_for_a_slot(home):
    graph, status, results = run_backfill(["wide"], "bf-backlog", max_parallel=2)
    assert set(status.values()) == {NodeStatus.SUCCEEDED}
    runs = defaultdict(list)
    for node, result in results.items():
        runs[(result.started, result.run_id)].append(node.partition)
    # 8 ready nodes without downstream nodes, 2 slots, an asset never run in the instance:
    # its first two runs are one node each (how long a node takes is unknown until one
    # ends), then the other six share runs over both slots. Their split depends on how far
    # the other run got when one ends, and on the durations measured meanwhile: 3+2+1 here
    # on a quiet machine, one run more under a loaded suite's timing (the exact rule, on a
    # simulated clock: partition_assets_tests/unit/test_scheduling.py).
    ordered = [sorted(members) for _, members in sorted(runs.items())]
    # Launched together on two workers: which of them starts its run first is a race.
    assert sorted(ordered[:2]) == [["2024-01-01"], ["2024-01-02"]]
    assert sorted(day for members in ordered[2:] for day in members) == [f"2024-01-0{d}" for d in range(3, 9)]
    assert len(ordered) <= 6 and max(len(members) for members in ordered[2:]) >= 2, ordered


def test_earlier_backfill_runs_tell_each_assets_seconds_per_partition(home):
    # `wide` sleeps 0.05 s per partition; its 8 days ran in a few runs, some over a range.
    _, status, results = run_backfill(["wide"], "bf-durations", max_parallel=2)
    assert set(status.values()) == {NodeStatus.SUCCEEDED}
    runs = defaultdict(list)
    for result in results.values():
        runs[result.run_id].append(result)
    # The worker's clock around each run: the run's own start and end lie inside it.
    per_partition = [(members[0].ended - members[0].started) / len(members) for members in runs.values()]
    both = build_graph(
        engine_defs.defs.resolve_asset_graph(), [dg.AssetKey("wide"), dg.AssetKey("raw")], JANUARY_1_TO_8
    )
    with dg.DagsterInstance.get() as instance:
        recorded = recorded_seconds(instance, both)
    assert set(recorded) == {dg.AssetKey("wide")}  # raw never ran
    assert 0.05 <= recorded[dg.AssetKey("wide")] <= max(per_partition)


@pytest.mark.slow
def test_terminate_kills_its_own_workers_and_no_other_child_process(home):
    bystander = multiprocessing.get_context("spawn").Process(target=time.sleep, args=(120,))
    bystander.start()
    try:
        with dg.DagsterInstance.get() as instance:
            runner = DagsterNodeRunner(
                "partition_assets_tests.support.locations.engine_defs", 2, {BACKFILL_ID_TAG: "bf-terminate"}, instance
            )
        first = runner.launch(RunUnit(dg.AssetKey("raw"), ("2024-01-01",)))
        assert first.result()[0].succeeded  # a worker is up, its code loaded
        workers = set(multiprocessing.active_children()) - {bystander}
        assert workers
        runner.terminate()
        for worker in workers:
            worker.join(timeout=10)
        assert not any(worker.is_alive() for worker in workers)
        assert bystander.is_alive()
    finally:
        bystander.kill()
        bystander.join()


def test_a_warm_runner_serves_a_backfill_it_fits_with_the_backfills_tags(home):
    # A standby coordinator's workers, started before the backfill was known.
    children_before = set(multiprocessing.active_children())
    with dg.DagsterInstance.get() as instance:
        warm = DagsterNodeRunner("partition_assets_tests.support.locations.engine_defs", 4, {}, instance)
        spec = BackfillSpec(
            module="partition_assets_tests.support.locations.engine_defs", selection="key:raw", max_parallel=2
        )
        runner = node_runner_reusing(warm)(spec, {BACKFILL_ID_TAG: "bf-warm"}, instance)
    try:
        (result,) = runner.launch(RunUnit(dg.AssetKey("raw"), ("2024-01-01",)), {"unit": "tag"}).result()
        assert result.succeeded
        warm_workers = {worker.pid for worker in set(multiprocessing.active_children()) - children_before}
        with dg.DagsterInstance.get() as instance:
            run = instance.get_run_by_id(result.run_id)
            assert run.tags[BACKFILL_ID_TAG] == "bf-warm" and run.tags["unit"] == "tag"
            assert proven_backfill(instance, run.run_id, run.tags) == "bf-warm"
            started = next(iter(instance.all_logs(result.run_id, of_type=dg.DagsterEventType.RUN_START)))
        assert started.dagster_event.pid in warm_workers  # one of the warm workers ran it
    finally:
        runner.terminate()


def test_a_warm_runner_that_does_not_fit_is_terminated_for_a_new_one(home):
    children_before = set(multiprocessing.active_children())
    with dg.DagsterInstance.get() as instance:
        warm = DagsterNodeRunner("partition_assets_tests.support.locations.engine_defs", 2, {}, instance)
        warm.launch(RunUnit(dg.AssetKey("raw"), ("2024-01-01",))).result()  # its workers are up
        warm_workers = set(multiprocessing.active_children()) - children_before
        spec = BackfillSpec(
            module="partition_assets_tests.support.locations.engine_defs", selection="key:raw", max_parallel=3
        )
        runner = node_runner_reusing(warm)(spec, {BACKFILL_ID_TAG: "bf-cold"}, instance)  # needs 3 workers: warm has 2
    try:
        assert isinstance(runner, DagsterNodeRunner) and runner is not warm
        for worker in warm_workers:
            worker.join(timeout=10)
            assert not worker.is_alive()
    finally:
        runner.terminate()


def test_terminate_kills_every_started_worker_when_one_never_started(home):
    """A worker the pool made but could not start (its start raised: the fork server gone,
    no file descriptor left) has no process; the workers after it are killed all the same."""
    children_before = set(multiprocessing.active_children())
    with dg.DagsterInstance.get() as instance:
        runner = DagsterNodeRunner("partition_assets_tests.support.locations.engine_defs", 2, {}, instance)
        runner.launch(RunUnit(dg.AssetKey("raw"), ("2024-01-01",))).result()  # its workers are up
    started = set(multiprocessing.active_children()) - children_before
    # What a failed start leaves: a process made by the pool's context, first in its list.
    runner._context.workers.insert(0, runner._context.Process(target=print))
    runner.terminate()
    for worker in started:
        worker.join(timeout=10)
        assert not worker.is_alive()


def test_workers_load_one_at_a_time_when_the_coordinator_leaves_one_core(home, tmp_path, monkeypatch):
    # A code location file (each worker executes it: a file is never preloaded) that notes when it loads.
    loads = tmp_path / "loads"
    location = tmp_path / "noting_location.py"
    location.write_text(
        textwrap.dedent(
            f"""
            import time
            from pathlib import Path
            from partition_assets_tests.support.locations.engine_defs import defs
            started = time.time()
            time.sleep(0.3)
            with Path({str(loads)!r}).open("a") as noted:
                noted.write(f"{{started}} {{time.time()}}\\n")
            """
        )
    )
    monkeypatch.setattr(os, "cpu_count", lambda: 2)  # one core left to the workers
    with dg.DagsterInstance.get() as instance:
        runner = DagsterNodeRunner(str(location), 3, {}, instance)
    try:
        runner.wait_until_loaded()
    finally:
        runner.terminate()
    spans = sorted(tuple(map(float, line.split())) for line in loads.read_text().splitlines())
    assert len(spans) == 3
    for (_, ended), (started, _) in zip(spans, spans[1:], strict=False):
        assert started >= ended  # the next load began once the previous one was done


def test_a_runner_starts_every_worker_even_when_each_loads_before_the_next_is_started(home, monkeypatch):
    # Workers forked from a server that preloaded the code location load in a blink; slow
    # starts make each one idle before the pool is asked for the next.
    create = local_workers._WorkerRecordingContext.Process

    def slow_to_start(context, *args, **kwargs):
        if context.workers:
            time.sleep(1.5)
        return create(context, *args, **kwargs)

    monkeypatch.setattr(local_workers._WorkerRecordingContext, "Process", slow_to_start)
    with dg.DagsterInstance.get() as instance:
        runner = DagsterNodeRunner("partition_assets_tests.support.locations.engine_defs", 3, {}, instance)
    waiting = threading.Thread(target=runner.wait_until_loaded, daemon=True)
    try:
        waiting.start()
        waiting.join(timeout=60)
        assert not waiting.is_alive(), "a worker the runner waits for was never started"
        assert len(runner._context.workers) == 3
        assert all(worker.is_alive() for worker in runner._context.workers)
    finally:
        runner.terminate()


def test_backfill_run_starts_its_workers_before_planning_and_kills_them_when_the_plan_is_refused(home, monkeypatch):
    runners: list[DagsterNodeRunner] = []

    class NotedRunner(DagsterNodeRunner):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            runners.append(self)

    def refused_plan(spec, instance):
        assert runners, "no workers were loading while the backfill was planned"
        raise BackfillPlanError("refused for the test")

    monkeypatch.setattr(launching, "DagsterNodeRunner", NotedRunner)
    monkeypatch.setattr(launching, "graph_of", refused_plan)
    children_before = set(multiprocessing.active_children())
    spec = BackfillSpec(module=ENGINE_DEFS, selection="key:raw", start="2024-01-01", end="2024-01-02")
    with dg.DagsterInstance.get() as instance, pytest.raises(BackfillPlanError, match="refused for the test"):
        commands.run_backfill(spec, instance, SilentConsole())
    assert len(runners) == 1
    assert set(multiprocessing.active_children()) <= children_before  # its workers are gone


def test_a_backfill_given_fewer_runs_than_max_parallel_says_how_many_and_why_first_and_in_status(home, capsys):
    # The repo's dagster.yaml: the run queue runs 4 at a time, one kept free for production runs.
    why = (
        "runs at most 3 at a time, not --max-parallel 4: the instance runs at most 4 at a time "
        "(run_queue.max_concurrent_runs), partition_assets.backfills.reserve_runs keeps 1 free for production runs"
    )
    span = {"selection": "key:raw", "start": "2024-01-01", "end": "2024-01-02"}
    with dg.DagsterInstance.get() as instance:
        spec = BackfillSpec(module=ENGINE_DEFS, **span, max_parallel=4)
        assert commands.run_backfill(spec, instance, PrintingConsole()).succeeded
        first, *rest = capsys.readouterr().out.splitlines()
        assert re.fullmatch(rf"backfill \S+: 2 nodes; {re.escape(why)}", first), first
        assert not [line for line in rest if line.startswith("instance:")]  # one database for all runs here
        store = BackfillStore(instance)
        for backfill_id, max_parallel in (("bf-four", 4), ("bf-three", 3)):
            spec = BackfillSpec(module=ENGINE_DEFS, **span, max_parallel=max_parallel)
            record_at(store, backfill_id, BackfillStatus.RUNNING, spec)
        assert backfill_status(instance, "bf-four").fewer_runs == why
        assert backfill_status(instance, "bf-three").fewer_runs is None  # 3 fit: nothing to say


def test_on_dagster_s_default_event_log_the_command_says_once_what_it_costs_and_the_lines_that_drop_it(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))  # no dagster.yaml: what a new project has
    spec = BackfillSpec(module=ENGINE_DEFS, selection="key:raw", start="2024-01-01", end="2024-01-02")
    with dg.DagsterInstance.get() as instance:
        assert commands.run_backfill(spec, instance, PrintingConsole()).succeeded
    lines = capsys.readouterr().out.splitlines()
    notes = [line for line in lines if line.startswith("instance:")]
    assert notes == [lines[1]], lines  # right after the first line, in two lines with the guide's section
    assert f"about {launching.PER_RUN_DATABASE_CPU_SECONDS:.2f} CPU-s per node" in notes[0]
    assert lines[2].startswith("  ") and "(docs/guide/sparse-engine.md#per-node-overhead)" in lines[2]
    assert lines[3].startswith("[1/2] raw"), lines  # two lines, no more
    assert not any(line.startswith("gate:") for line in lines), lines  # engine_defs declares no gate
    # Once per instance: the next backfill on it (a command of its own, as a user's) says nothing of it.
    argv = ["-m", ENGINE_DEFS, "--select", "key:raw"]
    again = run_cli("backfill", "run", *argv, "--start", "2024-01-03", "--end", "2024-01-03")
    assert again.returncode == 0 and again.stdout.splitlines()[1].startswith("[1/1] raw"), again.stdout
    [lines_given] = re.findall(r"`([^`]+)`", lines[2])
    assert lines_given == "instance_class: {module: partition_assets.instance, class: EngineBackfillInstance}"
    fixed = tmp_path / "fixed"
    fixed.mkdir()
    (fixed / "dagster.yaml").write_text(lines_given + "\n")
    with dg.DagsterInstance.from_config(str(fixed)) as instance:  # those lines do drop it
        assert launching.per_run_database_note(instance) is None


def test_a_staged_backfill_without_a_gate_prints_no_gate_line(home, capsys):
    """`gate: 0 of 0 checks passed` said nothing but jargon when no asset declares a gate."""
    spec = BackfillSpec(module=ENGINE_DEFS, selection="key:raw", start="2024-01-01", end="2024-01-01")
    with dg.DagsterInstance.get() as instance:
        outcome = commands.run_backfill(spec, instance, PrintingConsole())
    assert outcome.succeeded, outcome.message
    lines = capsys.readouterr().out.splitlines()
    assert outcome.message.endswith("1 succeeded") and lines[-1].startswith("published:"), (outcome.message, lines)
    assert not any(line.startswith("gate:") for line in lines), lines
