"""The Delta IO manager's contract: scoped, atomic writes and exactly-filtered reads."""

import json
import os
import subprocess
import sys

import dagster as dg
import pyarrow as pa
import pytest
from deltalake import DeltaTable
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from partition_assets.partitions import daily, mappings
from partition_assets.run_tags import range_tags
from partition_assets.spark import SparkResource
from partition_assets_tests.support.example_tables import EXAMPLE_ASSETS
from partition_assets_tests.support.locations.probe_assets import numbers
from partition_assets_tests.support.results import failure_message

DAYS = daily("2024-01-01")


@pytest.fixture
def materialize(run_assets):
    """Materializes example assets (a key or a (first, last) range) and fails loudly."""

    def run(selection, partition_key=None, partition_range=None):
        return run_assets(
            EXAMPLE_ASSETS,
            selection,
            partition_key=partition_key,
            tags=range_tags(*partition_range) if partition_range else {},
            raise_on_error=True,
        )

    return run


def files_by_partition(table_path) -> dict[str, set[str]]:
    actions = pa.table(DeltaTable(str(table_path)).get_add_actions(flatten=True)).to_pydict()
    found: dict[str, set[str]] = {}
    for path, partition in zip(actions["path"], actions["partition.ds"]):
        found.setdefault(partition, set()).add(path)
    return found


def rows_by_partition(table_path) -> dict[str, list]:
    frame = DeltaTable(str(table_path)).to_pandas()
    return {
        ds: sorted(map(tuple, group.drop(columns="ds").astype(str).values.tolist()))
        for ds, group in frame.groupby("ds")
    }


def test_rematerializing_one_partition_leaves_every_other_identical(materialize, lake):
    hours = ("2024-01-01-00:00", "2024-01-01-05:00")
    assert materialize(["events"], partition_range=hours).success
    files_before = files_by_partition(lake / "events")
    rows_before = rows_by_partition(lake / "events")
    assert len(files_before) == 6

    assert materialize(["events"], partition_key="2024-01-01-02:00").success

    files_after = files_by_partition(lake / "events")
    rows_after = rows_by_partition(lake / "events")
    for hour in files_before:
        if hour == "2024-01-01-02:00":
            # Replaced by new files holding the same deterministic rows.
            assert files_after[hour].isdisjoint(files_before[hour])
        else:
            assert files_after[hour] == files_before[hour]
        assert rows_after[hour] == rows_before[hour]
    # One commit for the range, one for the single partition.
    assert DeltaTable(str(lake / "events")).version() == 1


def test_a_range_run_replaces_exactly_its_keys(materialize, lake):
    assert materialize(["events"], partition_range=("2024-01-01-00:00", "2024-01-04-23:00")).success
    assert materialize(["daily_orders"], partition_range=("2024-01-01", "2024-01-04")).success
    before = files_by_partition(lake / "daily_orders")

    assert materialize(["daily_orders"], partition_range=("2024-01-02", "2024-01-03")).success

    after = files_by_partition(lake / "daily_orders")
    assert set(after) == set(before)
    assert after["2024-01-01"] == before["2024-01-01"]
    assert after["2024-01-04"] == before["2024-01-04"]
    assert after["2024-01-02"].isdisjoint(before["2024-01-02"])
    assert after["2024-01-03"].isdisjoint(before["2024-01-03"])
    # The range's commit removed the two days' files and nothing else.
    version = DeltaTable(str(lake / "daily_orders")).version()
    log = (lake / "daily_orders" / "_delta_log" / f"{version:020d}.json").read_text()
    removed = [json.loads(line)["remove"] for line in log.splitlines() if '"remove"' in line]
    assert sorted(r["partitionValues"]["ds"] for r in removed) == sorted(
        d for d in ("2024-01-02", "2024-01-03") for _ in before[d]
    )


@dg.asset(
    partitions_def=DAYS,
    ins={"numbers": dg.AssetIn(partition_mapping=mappings.rolling_window(7))},
)
def window_probe(numbers: DataFrame) -> DataFrame:
    """Records which partitions and files its rolling-window input held."""
    files = numbers.inputFiles()
    return numbers.groupBy().agg(
        F.concat_ws(",", F.array_sort(F.collect_set("ds"))).alias("days_read"),
        F.lit(len(files)).alias("files_opened"),
    )


def test_reads_are_filtered_to_exactly_the_mapped_partitions(lake, run_assets):
    assert run_assets([numbers], ["numbers"], tags=range_tags("2024-01-01", "2024-01-20")).success
    files_per_day = {d: len(f) for d, f in files_by_partition(lake / "numbers").items()}
    assert run_assets([numbers, window_probe], ["window_probe"], partition_key="2024-01-15").success
    probe = DeltaTable(str(lake / "window_probe")).to_pandas().iloc[0]
    window = [f"2024-01-{d:02d}" for d in range(9, 16)]
    assert probe.days_read == ",".join(window)
    # Partition pruning: only the window's files were opened.
    assert probe.files_opened == sum(files_per_day[d] for d in window)


@pytest.fixture
def materialize_frame(run_assets):
    """Materializes a daily asset `target` whose output is `build_frame(spark)`."""

    def run(build_frame, partition_key=None, tags=None, metadata=None):
        @dg.asset(name="target", partitions_def=DAYS, metadata=metadata or {})
        def target(spark: SparkResource) -> DataFrame:
            return build_frame(spark.spark_session)

        return run_assets([target], ["target"], partition_key=partition_key, tags=tags or {})

    return run


@pytest.mark.parametrize(
    ("build_frame", "expected"),
    [
        (lambda s: s.range(3).withColumn("ds", F.lit("2024-01-09")), "outside this run"),
        (lambda s: s.range(3).withColumn("ds", F.lit(None).cast("string")), "null or empty"),
        (lambda s: s.range(3).withColumn("ds", F.to_timestamp(F.lit("2024-01-05"))), "has type timestamp"),
        # A date partition column is allowed (README "Reading tables with dagster-deltalake"),
        # but not into a table whose column is a string.
        (lambda s: s.range(3).withColumn("ds", F.to_date(F.lit("2024-01-05"))), "(ds: string -> date32[day])"),
        (lambda s: s.range(0).withColumn("ds", F.lit("2024-01-05")), "no rows"),
    ],
)
def test_bad_output_is_refused_and_nothing_is_written(lake, materialize_frame, build_frame, expected):
    good = materialize_frame(lambda s: s.range(2), partition_key="2024-01-05")
    assert good.success
    version = DeltaTable(str(lake / "target")).version()
    before = rows_by_partition(lake / "target")

    bad = materialize_frame(build_frame, partition_key="2024-01-05")

    assert not bad.success
    assert expected in failure_message(bad)
    assert DeltaTable(str(lake / "target")).version() == version
    assert rows_by_partition(lake / "target") == before
    # No staged files are left behind.
    assert not list((lake / "target" / "_staging").glob("*"))


def test_a_range_run_needs_the_partition_column(lake, materialize_frame):
    result = materialize_frame(lambda s: s.range(2), tags=range_tags("2024-01-01", "2024-01-02"))
    assert not result.success
    assert "no partition column ['ds']" in failure_message(result)
    assert not (lake / "target" / "_delta_log").exists()


def test_allow_empty_clears_the_partition(lake, materialize_frame):
    assert materialize_frame(lambda s: s.range(2), partition_key="2024-01-05").success
    cleared = materialize_frame(lambda s: s.range(0), partition_key="2024-01-05", metadata={"allow_empty": True})
    assert cleared.success
    assert DeltaTable(str(lake / "target")).to_pandas().empty


def test_tables_are_standard_delta_readable_by_delta_rs(materialize, lake):
    assert materialize(["events"], partition_key="2024-01-01-05:00").success
    table = DeltaTable(str(lake / "events"))
    assert table.metadata().partition_columns == ["ds"]
    assert table.protocol().min_reader_version >= 1
    frame = table.to_pandas(filters=[("ds", "=", "2024-01-01-05:00")])
    assert len(frame) == 24
    assert pa.schema(table.schema().to_arrow()).field("event_ts").type == pa.timestamp("us", tz="UTC")


@dg.asset(
    partitions_def=DAYS,
    backfill_policy=dg.BackfillPolicy.single_run(),
    ins={"previous": mappings.self_dependency("day_count")},
)
def day_count(context: dg.AssetExecutionContext, spark: SparkResource, previous: DataFrame | None) -> DataFrame:
    """How many days since the first: yesterday's count plus one, carried across runs."""
    first = context.partition_keys[0]
    carried = 0
    if previous is not None:
        carried = previous.filter(F.col("ds") < first).agg(F.max("days")).first()[0] or 0
    rows = [(carried + offset + 1, key) for offset, key in enumerate(context.partition_keys)]
    return spark.spark_session.createDataFrame(rows, "days long, ds string")


def test_a_missing_predecessor_is_the_same_error_whether_or_not_the_table_exists(run_assets, lake):
    def run(first: str, last: str):
        return run_assets([day_count], "day_count", tags=range_tags(first, last))

    # No table yet, mid-history: the count must not restart from zero on 2024-01-03.
    result = run("2024-01-03", "2024-01-04")
    assert not result.success
    assert "MissingPredecessorError" in failure_message(result) and "2024-01-02" in failure_message(result)
    assert not (lake / "day_count").exists()

    assert run("2024-01-01", "2024-01-03").success
    first_content = rows_by_partition(lake / "day_count")
    # The table exists now, but 2024-01-05's predecessor does not: the same error.
    result = run("2024-01-05", "2024-01-05")
    assert not result.success and "2024-01-04" in failure_message(result)
    assert rows_by_partition(lake / "day_count") == first_content

    # Re-running a range whose predecessor exists gives the same content again.
    assert run("2024-01-02", "2024-01-03").success
    assert (
        rows_by_partition(lake / "day_count")
        == first_content
        == {
            "2024-01-01": [("1",)],
            "2024-01-02": [("2",)],
            "2024-01-03": [("3",)],
        }
    )


# Runs in a process of its own whose Spark Connect server is killed and started again (by a resume,
# another run, the operator) in the middle of one run (argv[4] `mid-run`) or between two
# (`between-runs`): Spark Connect sessions are one per process, and this server is not the session's.
RUNS_WHOSE_SERVER_IS_KILLED = """
import os, signal, sys, time
from pathlib import Path
import dagster as dg
from partition_assets.run_tags import BACKFILL_ID_TAG
from partition_assets.spark import LocalConnectServer, SparkResource
from partition_assets.spark.resource import spark_conf_from_env
from partition_assets.storage.io_manager import SparkDeltaIOManager
from partition_assets_tests.support.results import failure_message

port, state, lake, when = int(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], sys.argv[4]
server = LocalConnectServer(port=port, driver_memory="1g", conf=spark_conf_from_env(), state_dir=state)
server.ensure_running()

def kill_and_restart():
    os.killpg(server.recorded_server().pid, signal.SIGKILL)
    while server.is_running():
        time.sleep(0.1)
    server.ensure_running()

@dg.asset
def numbers(spark: SparkResource):
    frame = spark.spark_session.createDataFrame([(1,)], "n long")
    frame.schema  # a call: the session is attached to the server
    if when == "mid-run":
        kill_and_restart()
    return frame

def run():
    spark = SparkResource(remote=server.url, unreachable_seconds=30)
    return dg.materialize(
        [numbers],
        resources={"spark": spark, "io_manager": SparkDeltaIOManager(root_uri=lake, spark=spark)},
        tags={BACKFILL_ID_TAG: "b1"},
        raise_on_error=False,
    )

try:
    if when == "between-runs":
        assert run().success
        kill_and_restart()
    result = run()
    print("success" if result.success else failure_message(result))
finally:
    server.stop()
"""


def _runs_whose_server_is_killed(tmp_path, when: str) -> tuple[int, str]:
    """The port of the server, and the last run's outcome: `success` or its failure."""
    port = int(os.environ["PARTITION_ASSETS_SPARK_CONNECT_PORT"]) + 2  # not the session's server, nor e2e's
    arguments = [str(port), str(tmp_path / "spark"), str(tmp_path / "lake"), when]
    done = subprocess.run(
        [sys.executable, "-c", RUNS_WHOSE_SERVER_IS_KILLED, *arguments], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return port, done.stdout


def test_a_run_whose_spark_server_was_killed_and_restarted_fails_naming_the_server_not_no_active_session(tmp_path):
    """Issue 55, found by the soak: a node run whose Spark server was killed (and started again
    under it) failed with Spark's `[NO_ACTIVE_SESSION] No active Spark session found`, which
    does not say the server died nor what runs the node again."""
    port, failure = _runs_whose_server_is_killed(tmp_path, "mid-run")
    assert f"SparkServerGoneError: the Spark Connect server at sc://127.0.0.1:{port} is gone or was restarted" in (
        failure
    ), failure
    assert "This node runs again on `partition-assets backfill resume b1`" in failure, failure
    assert "output was not committed" in failure and not (tmp_path / "lake" / "numbers" / "_delta_log").exists()


def test_a_run_after_its_processes_spark_server_was_restarted_takes_a_new_session_and_succeeds(tmp_path):
    """A process's runs share its Spark Connect session: the first run after its server was
    restarted (a backfill's worker, after a resume started the server again) failed on the old
    session, which the new server does not know, though it had done nothing on it yet."""
    _, outcome = _runs_whose_server_is_killed(tmp_path, "between-runs")
    assert outcome.strip() == "success", outcome
