"""`partition_assets.definitions`, the one call wiring a project (partition_assets/_wiring.py):
what it adds (read on the example code location, which it builds), each part replaced or left
out by an option, and an option it does not take refused by name. The Definitions are Dagster's
own, resolved; a backfill through them runs in partition_assets_tests/e2e/test_installed_wheel.py."""

import dagster as dg
import pytest

import partition_assets
from partition_assets.automation.operations import OPERATION_JOBS
from partition_assets.deploy import GIT_SHA_TAG
from partition_assets.example import defs as example_defs
from partition_assets.spark import SparkResource
from partition_assets.storage import SparkDeltaIOManager


@dg.asset(partitions_def=partition_assets.daily("2024-01-01"))
def visits(context: dg.AssetExecutionContext) -> int:
    return len(context.partition_key)


def test_one_call_adds_every_part_the_engine_needs(monkeypatch, tmp_path):
    monkeypatch.setenv("PARTITION_ASSETS_LAKE", str(tmp_path / "lake"))
    gated = dg.asset(
        name="gated",
        partitions_def=partition_assets.daily("2024-01-01"),
        metadata=partition_assets.backfill_gate(row_change=0.1),
    )(lambda: 1)
    defs = partition_assets.definitions(assets=[visits, gated], module=__name__, delta=True, git_versions=False)
    jobs = {job.name for job in defs.jobs}
    assert jobs == {"sparse_backfill", "pause_backfill", *OPERATION_JOBS}
    assert [sensor.name for sensor in defs.sensors] == ["eager_partitions"]
    io_manager = defs.resources["io_manager"]
    assert isinstance(io_manager, SparkDeltaIOManager) and io_manager.root_uri == str(tmp_path / "lake")
    assert isinstance(defs.resources["spark"], SparkResource)
    assert defs.executor is dg.in_process_executor
    checks = defs.resolve_asset_graph().asset_check_keys
    assert {check.asset_key for check in checks} == {dg.AssetKey("gated")}


def test_the_example_is_wired_by_it_with_its_own_sensors_schedule_and_git_versions():
    assert {job.name for job in example_defs.jobs} >= {"sparse_backfill", "pause_backfill", *OPERATION_JOBS}
    assert [sensor.name for sensor in example_defs.sensors] == ["eager_partitions", "catch_up"]
    assert [schedule.name for schedule in example_defs.schedules] == ["weekday_revenue"]
    assert GIT_SHA_TAG in example_defs.metadata
    assert isinstance(example_defs.resources["io_manager"], SparkDeltaIOManager)


def test_each_part_is_replaced_or_left_out_by_its_option(tmp_path):
    own_io = dg.FilesystemIOManager(base_dir=str(tmp_path))
    own_spark = SparkResource(remote="sc://127.0.0.1:1")
    own_engine = partition_assets.sparse_backfill_job(module=__name__, name="my_engine")
    defs = partition_assets.definitions(
        assets=[visits],
        module=__name__,
        spark=own_spark,
        io_manager=own_io,
        engine=own_engine,
        operation_jobs=False,
        eager_sensor=False,
        gate_checks=False,
        executor=None,
        git_versions=False,
        resources={"extra": dg.ResourceDefinition.hardcoded_resource(1)},
    )
    assert defs.resources["io_manager"] is own_io and defs.resources["spark"] is own_spark
    assert set(defs.resources) == {"io_manager", "spark", "extra"}
    assert [job.name for job in defs.jobs] == ["my_engine"]
    assert list(defs.sensors or []) == [] and defs.executor is None
    assert GIT_SHA_TAG not in (defs.metadata or {})


def test_an_option_it_does_not_take_is_refused_by_name_and_nothing_is_built():
    with pytest.raises(partition_assets.WiringError) as refused:
        partition_assets.definitions(assets=[visits], module=__name__, lakes="/tmp/lake", git_versions=False)
    message = str(refused.value)
    assert "takes no option 'lakes' (did you mean 'lake'?)" in message and "nothing was built" in message
    assert isinstance(refused.value, partition_assets.PartitionAssetsError)


@dg.asset(partitions_def=partition_assets.daily("2024-01-01"))
def spark_visits(spark: SparkResource) -> None: ...


@dg.asset(partitions_def=partition_assets.daily("2024-01-01"), io_manager_key="delta_io_manager")
def delta_visits() -> None: ...


def test_a_project_asking_for_no_spark_keeps_dagsters_io_manager_and_no_spark():
    defs = partition_assets.definitions(assets=[visits], module=__name__, git_versions=False)
    assert set(defs.resources or {}) == set()  # Dagster's default IO manager, no Spark resource
    own_io = dg.FilesystemIOManager(base_dir="/tmp")
    kept = partition_assets.definitions(assets=[visits], module=__name__, io_manager=own_io, git_versions=False)
    assert dict(kept.resources or {}) == {"io_manager": own_io}


def test_spark_and_delta_are_wired_when_an_asset_asks_for_them_or_delta_is_asked(tmp_path):
    for assets, options in (([visits, spark_visits], {}), ([visits], {"delta": True}), ([visits], {"lake": "x"})):
        defs = partition_assets.definitions(assets=assets, module=__name__, git_versions=False, **options)
        assert isinstance(defs.resources["io_manager"], SparkDeltaIOManager), options
        assert isinstance(defs.resources["spark"], SparkResource)
    # An asset naming the Delta key is stored as Delta beside the project's own default IO manager.
    own_io = dg.FilesystemIOManager(base_dir=str(tmp_path))
    mixed = partition_assets.definitions(
        assets=[visits, delta_visits], module=__name__, io_manager=own_io, git_versions=False
    )
    assert mixed.resources["io_manager"] is own_io
    assert isinstance(mixed.resources[partition_assets.DELTA_IO_MANAGER_KEY], SparkDeltaIOManager)
    # delta=False: the spark resource an asset requests, never the Delta IO manager.
    plain = partition_assets.definitions(assets=[spark_visits], module=__name__, delta=False, git_versions=False)
    assert set(plain.resources) == {"spark"}
