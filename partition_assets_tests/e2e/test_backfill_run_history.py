"""Re-running history on the example code location, end to end through
`partition-assets backfill` on real Spark, Delta tables and a Dagster instance: a re-run
reproduces every table (batched or not), pinned inputs reproduce the original after the
source changed, runtime drift is reported, and explicit keys run exactly those partitions."""

import json
import os
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pytest
from deltalake import DeltaTable

from partition_assets.backfill.state.ledger import Ledger, ledger_uri
from partition_assets.deploy.runtime import runtime_versions
from partition_assets.run_tags import BACKFILL_ID_TAG, INPUTS_AS_OF_TAG, pinned_inputs, range_tags
from partition_assets.storage import SparkDeltaIOManager
from partition_assets_tests.support import REPO
from partition_assets_tests.support.cli_runs import backfill_id, ok, run_cli
from partition_assets_tests.support.example_tables import EXAMPLE_ASSETS
from partition_assets_tests.support.instances import instance_env
from partition_assets_tests.support.readers import delta_row_set

EXAMPLE = ["-m", "partition_assets.example"]

pytestmark = pytest.mark.slow


class ExampleLake:
    """A Dagster home and a lake for the example code location, driven through the CLI."""

    def __init__(self, root: Path) -> None:
        self.home = root / "dagster_home"
        self.lake = root / "lake"

    def env(self) -> dict[str, str]:
        return {**os.environ, "DAGSTER_HOME": str(self.home), "PARTITION_ASSETS_LAKE": str(self.lake)}

    def run(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(args, cwd=REPO, env=self.env(), capture_output=True, text=True, timeout=900)

    def backfill(self, *args: str) -> subprocess.CompletedProcess:
        return run_cli("backfill", *args, env=self.env(), timeout=900)

    def backfill_run(self, selection: str, *args: str) -> str:
        """Runs a backfill to its end; returns its id."""
        return backfill_id(ok(self.backfill("run", *EXAMPLE, "--select", selection, *args)))

    def tables(self) -> list[str]:
        return sorted(path.name for path in self.lake.iterdir() if (path / "_delta_log").is_dir())

    def content(self, table: str) -> frozenset:
        return delta_row_set(self.lake / table)

    def contents(self) -> dict[str, frozenset]:
        return {table: self.content(table) for table in self.tables()}

    def version(self, table: str) -> int:
        return DeltaTable(str(self.lake / table)).version()

    def checksums(self, bid: str) -> dict[tuple[str, str], str | None]:
        return {(e.asset, e.partition): e.checksum for e in Ledger(ledger_uri(str(self.lake))).latest(bid)}

    def instance(self) -> dg.DagsterInstance:
        return dg.DagsterInstance.from_config(str(self.home))


# The original history: each asset materialized by one range run over its first week,
# upstream first (as `dagster asset materialize --partition-range` would).
BASE_RUNS = [
    ("events", "2024-01-01-00:00", "2024-01-07-23:00"),
    ("events_6h", "2024-01-01-00:00", "2024-01-07-18:00"),
    ("countries", "br", "us"),
    ("regions", "amer", "emea"),
    ("daily_orders", "2024-01-01", "2024-01-07"),
    ("daily_region_revenue", "2024-01-01|amer", "2024-01-07|emea"),
    ("region_revenue_7d", "2024-01-01|amer", "2024-01-07|emea"),
    ("daily_revenue", "2024-01-01", "2024-01-07"),
    ("revenue_7d", "2024-01-01", "2024-01-07"),
    ("revenue_running_total", "2024-01-01", "2024-01-07"),
    ("weekly_revenue", "2024-01-01", "2024-01-01"),
    ("monthly_revenue", "2024-01-01", "2024-01-01"),
    ("monthly_targets", "2024-01-01", "2024-01-01"),
    ("daily_target_attainment", "2024-01-01", "2024-01-07"),
    ("fx_rates", "2024-01-01", "2024-01-07"),
    ("daily_revenue_eur", "2024-01-01", "2024-01-07"),
]
# Every example asset the re-runs rewrite: all but the hourly source and the dynamic report.
RERUN = "not key:events and not key:campaign_report"


@pytest.fixture(scope="module")
def base(tmp_path_factory, spark_resource) -> ExampleLake:
    """The example's first week (all but campaign_report), for the tests to copy."""
    lake = ExampleLake(tmp_path_factory.mktemp("rerun_base"))
    instance_env(lake.home)
    io_manager = SparkDeltaIOManager(root_uri=str(lake.lake), spark=spark_resource)
    with lake.instance() as instance:
        for asset, first, last in BASE_RUNS:
            dg.materialize(
                EXAMPLE_ASSETS,
                selection=[asset],
                tags=range_tags(first, last),
                instance=instance,
                resources={"spark": spark_resource, "io_manager": io_manager},
            )
    return lake


@pytest.fixture
def example(base, tmp_path) -> ExampleLake:
    """A copy of the base lake and instance, for one test to change."""
    copy = ExampleLake(tmp_path)
    shutil.copytree(base.home, copy.home)
    shutil.copytree(base.lake, copy.lake)
    return copy


def test_a_mid_history_rerun_reproduces_every_table_with_and_without_batching(example):
    original = example.contents()
    assert len(original) == len(BASE_RUNS) and all(original.values())
    batched = example.backfill_run(RERUN, "--start", "2024-01-03", "--end", "2024-01-04")
    assert example.contents() == original
    # A run per partition: one day of the two is enough to compare (the unbatched re-run is the slow one).
    one_by_one = example.backfill_run(RERUN, "--start", "2024-01-04", "--end", "2024-01-04", "--no-batch")
    assert example.contents() == original
    # The ledger's content checksums of both re-runs agree partition by partition.
    checksums = example.checksums(batched)
    assert len(checksums) > 40 and all(checksums.values())
    unbatched = example.checksums(one_by_one)
    assert len(unbatched) > 20 and unbatched.items() <= checksums.items()
    with example.instance() as instance:
        runs = [run.tags for run in instance.get_runs(dg.RunsFilter(tags={BACKFILL_ID_TAG: one_by_one}))]
        assert not any("dagster/asset_partition_range_start" in tags for tags in runs)


def test_pinned_inputs_reproduce_the_original_after_the_source_changed_and_unpinned_do_not(example):
    original = example.content("daily_revenue_eur")
    fx_version = example.version("fx_rates")
    time.sleep(0.05)
    between = datetime.now(UTC).isoformat()  # after the original, before the correction
    time.sleep(0.05)
    ok(example.run(sys.executable, "-m", "partition_assets.example.fx_corrections", "2024-01-03", "eur", "0.5"))
    assert example.version("fx_rates") == fx_version + 1
    span = ["--start", "2024-01-02", "--end", "2024-01-04"]

    pinned = example.backfill_run("key:daily_revenue_eur", *span, "--inputs-as-of", "original")
    assert example.content("daily_revenue_eur") == original
    with example.instance() as instance:
        runs = instance.get_runs(dg.RunsFilter(tags={BACKFILL_ID_TAG: pinned}))
        node_runs = [run for run in runs if run.asset_selection]
        assert node_runs and all(run.tags[INPUTS_AS_OF_TAG] == "original" for run in node_runs)
        assert {pinned_inputs(run.tags)["fx_rates"] for run in node_runs} == {fx_version}
        event = instance.get_latest_materialization_event(dg.AssetKey("daily_revenue_eur"))
        metadata = event.asset_materialization.metadata
        assert metadata["inputs_as_of"].value == "original"
        assert metadata["input_versions"].value["fx_rates"] == fx_version
        assert metadata["runtime"].value == runtime_versions()  # recorded for staged writes too
    ledger = Ledger(ledger_uri(str(example.lake))).latest(pinned)
    assert len(ledger) == 3
    assert all(e.inputs_as_of == "original" and e.input_versions["fx_rates"] == fx_version for e in ledger)

    ok(example.backfill("run", *EXAMPLE, "--select", "key:daily_revenue_eur", *span, "--inputs-as-of", between))
    assert example.content("daily_revenue_eur") == original

    example.backfill_run("key:daily_revenue_eur", *span)  # unpinned: reads the corrected rate
    changed = example.content("daily_revenue_eur") ^ original
    assert {dict(row)["ds"] for row in changed} == {"2024-01-03"}


def test_pinning_to_originals_that_recorded_no_input_version_is_refused_before_anything_runs(example):
    with example.instance() as instance:
        runs_before = len(instance.get_runs())
    refused = example.backfill(
        "run", *EXAMPLE, "--select", "key:daily_revenue_eur", "--start", "2024-02-01", "--end", "2024-02-01",
        "--inputs-as-of", "original",
    )  # fmt: skip
    assert refused.returncode == 2
    assert "daily_revenue_eur 2024-02-01 was never materialized" in refused.stderr
    assert "nothing was launched" in refused.stderr
    with example.instance() as instance:
        assert len(instance.get_runs()) == runs_before


def test_materializations_record_their_runtime_and_a_rerun_warns_when_it_changed(example):
    with example.instance() as instance:
        event = instance.get_latest_materialization_event(dg.AssetKey("daily_revenue"))
        assert event.asset_materialization.metadata["runtime"].value == runtime_versions()
        older = {**runtime_versions(), "pyspark": "3.5.0"}
        # An original written on another runtime: the materialization an older deployment recorded.
        instance.report_runless_asset_event(
            dg.AssetMaterialization(
                "daily_revenue", partition="2024-01-05", metadata={"runtime": dg.MetadataValue.json(older)}
            )
        )
    result = example.backfill(
        "run", *EXAMPLE, "--select", "key:daily_revenue", "--start", "2024-01-04", "--end", "2024-01-05"
    )
    ok(result)
    drift = f"pyspark 3.5.0 -> {runtime_versions()['pyspark']}"
    assert f"daily_revenue: 1 partition(s) were written on another runtime ({drift})" in result.stderr


def test_explicit_keys_rewrite_exactly_those_partitions(example):
    versions = {table: example.version(table) for table in ("daily_revenue", "daily_region_revenue", "daily_orders")}
    bid = example.backfill_run(
        "key:daily_revenue or key:daily_region_revenue", "--keys", "2024-01-02,2024-01-05", "--keys", "2024-01-06|emea"
    )
    written = {(e.asset, e.partition) for e in Ledger(ledger_uri(str(example.lake))).latest(bid)}
    assert written == {
        ("daily_revenue", "2024-01-02"),
        ("daily_revenue", "2024-01-05"),
        ("daily_region_revenue", "2024-01-06|emea"),
    }
    assert example.version("daily_orders") == versions["daily_orders"]  # not selected: untouched
    with example.instance() as instance:
        node_runs = [r for r in instance.get_runs(dg.RunsFilter(tags={BACKFILL_ID_TAG: bid})) if r.asset_selection]
        # 01-02 and 01-05 are not adjacent: two runs, never one range over the days between.
        assert sorted(
            r.tags.get("dagster/partition") for r in node_runs if r.asset_selection == {dg.AssetKey("daily_revenue")}
        ) == [
            "2024-01-02",
            "2024-01-05",
        ]
    assert json.loads(ok(example.backfill("ledger", bid, "--json")))[0]["status"] == "published"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["2024-01-03", "eur", "0.5"], "no eur rate for 2024-01-03"),  # the lake holds no fx_rates table
        (["2024-13-03", "eur", "0.5"], "invalid"),
        (["2024-01-03", "gbp", "0.5"], "invalid choice"),
        (["2024-01-03", "eur", "-1"], "must be > 0"),
    ],
)
def test_fx_corrections_refuses_bad_input_and_changes_nothing(tmp_path, args, message):
    lake = tmp_path / "lake"
    command = [sys.executable, "-m", "partition_assets.example.fx_corrections", *args, "--lake", str(lake)]
    refused = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2
    assert message in refused.stderr
    assert not lake.exists()
