"""The engine job and the sensors as users run them: `dagster dev` (webserver + daemon)
serving a light code location, sensors turned on with the UI's mutation, runs launched
through GraphQL."""

from collections import Counter

import dagster as dg
import pytest
from dagster._core.execution.backfill import BulkActionStatus

from partition_assets.automation import CATCH_UP_TAG, backfill_run_config
from partition_assets.backfill.state.record import BACKFILL_ID_TAG
from partition_assets.backfill.state.store import BackfillStore
from partition_assets.dagster_instance.daemon_filter import ENGINE_TAG, SPARSE
from partition_assets_tests.support.instances import ON_SQLITE, also_on_postgres, postgres_url_for
from partition_assets_tests.support.locations import automation_defs
from partition_assets_tests.support.polling import wait_for
from partition_assets_tests.support.processes import alive, started_at
from partition_assets_tests.support.webserver import DagsterDev

pytestmark = pytest.mark.slow

LATENCY_GOAL = 5.0
_DONE = {dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED}


@pytest.fixture(scope="module", params=ON_SQLITE)
def dev(request, tmp_path_factory):
    """`dagster dev` on SQLite; for tests marked also_on_postgres, a second one on Postgres."""
    server = DagsterDev(
        tmp_path_factory.mktemp("automation"),
        "partition_assets_tests.support.locations.automation_defs",
        postgres_url=postgres_url_for(request),
    )
    try:
        server.wait_until_ready()
        yield server
    finally:
        server.stop()


@pytest.fixture
def instance(dev):
    """Here, the instance `dagster dev` serves (the engine's workers find it by DAGSTER_HOME)."""
    with dev.open_instance() as shared:
        yield shared


def materialize(instance, asset, partition, fail=False):
    config = {"ops": {asset.op.name: {"config": {"fail": fail}}}}
    return dg.materialize([asset], partition_key=partition, instance=instance, run_config=config, raise_on_error=False)


def runs_of(instance, asset: str, **tags) -> list[dg.RunRecord]:
    """Runs whose selection includes `asset`."""
    return [
        r
        for r in instance.get_run_records(dg.RunsFilter(tags=tags))
        if dg.AssetKey(asset) in (r.dagster_run.asset_selection or ())
    ]


def materializations(instance, asset: str, partition: str) -> list[dg.EventLogRecord]:
    """Newest first."""
    return instance.fetch_materializations(
        dg.AssetRecordsFilter(dg.AssetKey(asset), asset_partitions=[partition]), limit=100
    ).records


def finished_ticks(dev, name: str) -> list[dict]:
    """The sensor's finished ticks, newest first (read through GraphQL, as the UI does)."""
    query = (
        "query($s: SensorSelector!) { sensorOrError(sensorSelector: $s) { ... on Sensor { "
        "sensorState { ticks(limit: 1000) { status skipReason } } } } }"
    )
    found = dev.graphql(query, {"s": dev.selector(sensorName=name)})["sensorOrError"]["sensorState"]["ticks"]
    return [t for t in found if t["status"] != "STARTED"]


def ticks(dev, name: str) -> int:
    return len(finished_ticks(dev, name))


def wait_for_sensor_ticks(dev, name: str, count: int) -> None:
    wait_for(lambda: ticks(dev, name) >= count, 60, step=0.5)


def requested_latency(instance, upstream: str, partition: str, downstream: str, downstream_partition: str) -> float:
    """Seconds from the upstream materialization's event to the downstream run's creation."""
    event = materializations(instance, upstream, partition)[0]

    def requested():
        return [
            r
            for r in runs_of(instance, downstream, **{"dagster/partition": downstream_partition})
            if r.create_timestamp.timestamp() > event.timestamp
        ]

    first = min(r.create_timestamp.timestamp() for r in wait_for(requested, 30))
    return first - event.timestamp


@also_on_postgres("dev")
def test_eager_sensor_requests_ready_partitions_within_the_latency_goal(dev, instance):
    dev.start_sensor("eager")
    wait_for_sensor_ticks(dev, "eager", 1)  # its cursor now starts before our events

    assert materialize(instance, automation_defs.eager_up, "2024-01-02").success
    latency = requested_latency(instance, "eager_up", "2024-01-02", "eager_down", "2024-01-02")
    print(f"eager_up[2024-01-02] -> eager_down run created: {latency:.2f} s")
    assert latency <= LATENCY_GOAL

    assert materialize(instance, automation_defs.eager_up, "2024-01-01").success
    # eager_pair[2024-01-02] reads days 1 and 2: it was not requested before day 1 existed.
    day_1 = materializations(instance, "eager_up", "2024-01-01")[0].timestamp
    assert all(r.create_timestamp.timestamp() > day_1 for r in runs_of(instance, "eager_pair"))
    latencies = [
        requested_latency(instance, "eager_up", "2024-01-01", downstream, partition)
        for downstream, partition in [
            ("eager_down", "2024-01-01"),
            ("eager_pair", "2024-01-01"),
            ("eager_pair", "2024-01-02"),
        ]
    ]
    print("eager_up[2024-01-01] -> down[01], pair[01], pair[02] created: " + ", ".join(f"{s:.2f} s" for s in latencies))
    assert max(latencies) <= LATENCY_GOAL

    # Once those runs are done their partitions are current: nothing more is requested.
    def eager_runs():
        return {r.dagster_run.run_id: r for a in ("eager_down", "eager_pair") for r in runs_of(instance, a)}

    def all_done():
        runs = eager_runs()
        return all(r.dagster_run.status in _DONE for r in runs.values()) and runs

    runs = wait_for(all_done, 120, step=0.5)
    assert {r.dagster_run.status for r in runs.values()} == {dg.DagsterRunStatus.SUCCESS}
    nodes = Counter(
        (k.to_user_string(), r.dagster_run.tags["dagster/partition"])
        for r in runs.values()
        for k in r.dagster_run.asset_selection
    )
    assert nodes == {(a, f"2024-01-0{d}"): 1 for a in ("eager_down", "eager_pair") for d in (1, 2)}
    queued = [r.start_time - r.create_timestamp.timestamp() for r in runs.values()]
    print("run created -> started (run queue): " + ", ".join(f"{s:.2f} s" for s in queued))
    wait_for_sensor_ticks(dev, "eager", 2 + ticks(dev, "eager"))  # a whole tick after they were done
    assert eager_runs().keys() == runs.keys()


def test_catch_up_sensor_fills_exactly_the_missing_and_failed_partitions(dev, instance):
    raw, clean = automation_defs.gap_raw, automation_defs.gap_clean
    for day in ("01", "02", "03", "05", "06", "08"):
        assert materialize(instance, raw, f"2024-01-{day}").success
    for day in ("01", "02"):
        assert dg.materialize([clean], partition_key=f"2024-01-{day}", instance=instance).success
    assert not materialize(instance, raw, "2024-01-06", fail=True).success  # materialized, then failed
    expected = {("gap_raw", f"2024-01-{d}") for d in ("04", "06", "07", "09")} | {
        ("gap_clean", f"2024-01-{d:02d}") for d in range(3, 10)
    }  # 2024-01-10 is the newest window: not a gap

    dev.start_sensor("catch_up")

    def engine_runs():
        return instance.get_runs(dg.RunsFilter(job_name=automation_defs.engine.name, tags={CATCH_UP_TAG: "catch_up"}))

    coordinator = wait_for(engine_runs, 60, step=0.5)[0]
    backfill_id = coordinator.tags[BACKFILL_ID_TAG]
    finished = wait_for(
        lambda: (
            instance.get_run_by_id(coordinator.run_id).status in _DONE and instance.get_run_by_id(coordinator.run_id)
        ),
        180,
        step=0.5,
    )
    assert finished.status == dg.DagsterRunStatus.SUCCESS
    node_runs = [r for r in instance.get_runs(dg.RunsFilter(tags={BACKFILL_ID_TAG: backfill_id})) if r.asset_selection]
    filled = Counter((next(iter(r.asset_selection)).to_user_string(), r.tags["dagster/partition"]) for r in node_runs)
    assert set(filled) == expected and set(filled.values()) == {1}
    assert {r.status for r in node_runs} == {dg.DagsterRunStatus.SUCCESS}
    assert_listed_as_dagster_backfill(instance, backfill_id, BulkActionStatus.COMPLETED_SUCCESS)
    for day in ("01", "02", "03", "05", "08"):  # current partitions were never run again
        assert len(materializations(instance, "gap_raw", f"2024-01-{day}")) == 1

    wait_for_sensor_ticks(dev, "catch_up", 2 + ticks(dev, "catch_up"))  # later ticks find no gaps
    assert len(engine_runs()) == 1
    skipped = [t["skipReason"] for t in finished_ticks(dev, "catch_up")]
    assert f"backfill {backfill_id} is still running" in skipped  # one backfill at a time
    assert skipped[0] == "no gaps in group:gaps"


def launch_engine_job(dev, **config) -> str:
    """What the Launchpad's Launch button does; returns the run id."""
    launched = dev.graphql(
        "mutation($p: ExecutionParams!) { launchRun(executionParams: $p) { __typename "
        "... on LaunchRunSuccess { run { runId } } ... on PythonError { message } "
        "... on RunConfigValidationInvalid { errors { message } } } }",
        {
            "p": {
                "selector": dev.selector(jobName=automation_defs.engine.name),
                "runConfigData": backfill_run_config(**config),
            }
        },
    )["launchRun"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    return launched["run"]["runId"]


def test_engine_job_launched_through_graphql_groups_its_runs_by_backfill_id(dev, instance):
    run_id = launch_engine_job(dev, selection="group:jobs", start="2024-01-01", end="2024-01-02", max_parallel=2)
    run = wait_for(lambda: instance.get_run_by_id(run_id).status in _DONE and instance.get_run_by_id(run_id), 180, 0.5)
    assert run.status == dg.DagsterRunStatus.SUCCESS

    backfill_id = run.tags[BACKFILL_ID_TAG]  # added by the coordinator to its own run
    tagged = instance.get_runs(dg.RunsFilter(tags={BACKFILL_ID_TAG: backfill_id}))
    assert run_id in {r.run_id for r in tagged}
    assert {
        (next(iter(r.asset_selection)).to_user_string(), r.tags["dagster/partition"])
        for r in tagged
        if r.asset_selection
    } == {(asset, f"2024-01-0{d}") for asset in ("job_raw", "job_clean") for d in (1, 2)}
    assert_listed_as_dagster_backfill(instance, backfill_id, BulkActionStatus.COMPLETED_SUCCESS)
    record = BackfillStore(instance).load(backfill_id)
    assert (record.spec.selection, record.spec.start, record.spec.end, record.status) == (
        "group:jobs",
        "2024-01-01",
        "2024-01-02",
        "published",
    )


def test_engine_job_fails_with_the_failed_nodes_named(dev, instance):
    marker = automation_defs.failing_partition_marker()
    marker.write_text("2024-01-03")
    try:
        result = automation_defs.engine.execute_in_process(
            run_config=backfill_run_config(selection="group:jobs", start="2024-01-03", end="2024-01-04"),
            instance=instance,
            raise_on_error=False,
        )
    finally:
        marker.unlink()
    assert not result.success
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    message = failure.event_specific_data.error.message
    assert "RuntimeError: job_raw fails on 2024-01-03 (1 node: job_raw[2024-01-03])" in message
    assert "1 node blocked" in message
    backfill_id = instance.get_run_by_id(result.run_id).tags[BACKFILL_ID_TAG]
    assert f"partition-assets backfill retry {backfill_id}" in message


def test_terminating_the_engine_job_cancels_its_backfill_and_re_executing_resumes_it(dev, instance):
    run_id = launch_engine_job(dev, selection="group:jobs", start="2024-01-05", end="2024-01-10", max_parallel=1)

    def node_runs():
        run = instance.get_run_by_id(run_id)
        backfill_id = run.tags.get(BACKFILL_ID_TAG)
        return backfill_id and [
            r for r in instance.get_runs(dg.RunsFilter(tags={BACKFILL_ID_TAG: backfill_id})) if r.asset_selection
        ]

    wait_for(lambda: len([r for r in node_runs() or () if r.status == dg.DagsterRunStatus.SUCCESS]) >= 2, 120, 0.5)
    # The processes that launch its node runs: the coordinator's run worker, and the workers it forked.
    launching = {
        pid: start
        for run in [run_id, *(r.run_id for r in node_runs())]
        for pid, start in started(instance, run).items()
    }
    terminated = dev.graphql("mutation($id: String!) { terminateRun(runId: $id) { __typename } }", {"id": run_id})[
        "terminateRun"
    ]
    assert terminated["__typename"] == "TerminateRunSuccess", terminated
    wait_for(lambda: instance.get_run_by_id(run_id).status in _DONE, 60, 0.5)

    backfill_id = instance.get_run_by_id(run_id).tags[BACKFILL_ID_TAG]
    assert BackfillStore(instance).status(backfill_id) == "canceled"
    assert_listed_as_dagster_backfill(instance, backfill_id, BulkActionStatus.CANCELED)
    launched = node_runs()
    assert dg.DagsterRunStatus.STARTED not in {r.status for r in launched}
    assert len(launched) < 12  # launching stopped
    wait_for(lambda: not alive(launching), 60)  # once they are gone, none can launch a run
    assert len(node_runs()) == len(launched)

    # Re-execute in the UI: the same backfill resumes; what succeeded never runs again.
    succeeded = {
        (next(iter(r.asset_selection)), r.tags["dagster/partition"])
        for r in launched
        if r.status == dg.DagsterRunStatus.SUCCESS
    }
    again = dev.graphql(
        "mutation($p: ReexecutionParams!) { launchRunReexecution(reexecutionParams: $p) { __typename "
        "... on LaunchRunSuccess { run { runId } } ... on PythonError { message } } }",
        {"p": {"parentRunId": run_id, "strategy": "ALL_STEPS"}},
    )["launchRunReexecution"]
    assert again["__typename"] == "LaunchRunSuccess", again
    rerun = again["run"]["runId"]
    wait_for(lambda: instance.get_run_by_id(rerun).status in _DONE, 180, 0.5)
    assert instance.get_run_by_id(rerun).status == dg.DagsterRunStatus.SUCCESS
    assert instance.get_run_by_id(rerun).tags[BACKFILL_ID_TAG] == backfill_id
    final = Counter(
        (next(iter(r.asset_selection)), r.tags["dagster/partition"])
        for r in node_runs()
        if r.status == dg.DagsterRunStatus.SUCCESS
    )
    assert len(final) == 12 and set(final.values()) == {1}
    assert all(final[node] == 1 for node in succeeded)
    assert_listed_as_dagster_backfill(instance, backfill_id, BulkActionStatus.COMPLETED_SUCCESS)


def started(instance, run_id: str) -> dict[int, str]:
    """The process that started the run `run_id`, with its start time, while it runs."""
    (start,) = instance.all_logs(run_id, of_type=dg.DagsterEventType.RUN_START)
    return started_at(start.dagster_event.pid)


def assert_listed_as_dagster_backfill(instance, backfill_id: str, status: BulkActionStatus) -> None:
    """The engine backfill is the Dagster backfill of the same id (the UI's Backfills page),
    in `status`, marked as the engine's so that Dagster's daemon leaves it alone."""
    backfill = instance.get_backfill(backfill_id)
    assert backfill is not None and backfill.status == status, backfill
    assert backfill.tags[ENGINE_TAG] == SPARSE
