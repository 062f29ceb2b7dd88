"""The product from the shell, as a user runs it: `dagster asset materialize` and `make dev`."""

import os
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pytest
from deltalake import DeltaTable

from partition_assets.example import sources
from partition_assets.storage.partition_scope import PartitionScope, partition_columns
from partition_assets_tests.support import REPO
from partition_assets_tests.support.example_tables import EXAMPLE_ASSETS, expected_daily_orders, rows
from partition_assets_tests.support.instances import instance_env
from partition_assets_tests.support.polling import wait_for
from partition_assets_tests.support.webserver import DAGSTER, free_port, graphql, stop

pytestmark = pytest.mark.slow

# Every example asset, upstream first, with the partition (or range) a user would pick; the
# assets of one command share a partitions definition (a command loads the code location,
# seconds of the test's time). `--partition-range` needs BackfillPolicy.single_run(): the
# range is one run.
CLI_RUNS = [
    (("events",), "--partition-range", "2024-01-01-00:00...2024-01-03-23:00"),
    (("events_6h",), "--partition", "2024-01-01-06:00"),
    (("countries",), "--partition-range", "br...us"),
    (("regions",), "--partition-range", "amer...emea"),
    (("monthly_targets",), "--partition-range", "2024-01-01...2024-03-01"),
    (
        ("daily_orders", "daily_revenue", "revenue_7d", "daily_target_attainment", "fx_rates", "daily_revenue_eur"),
        "--partition-range",
        "2024-01-01...2024-01-03",
    ),
    # Its own run: it reads its previous day.
    (("revenue_running_total",), "--partition", "2024-01-01"),
    (("daily_region_revenue", "region_revenue_7d"), "--partition-range", "2024-01-01|amer...2024-01-03|emea"),
    (("weekly_revenue",), "--partition", "2024-01-01"),
    (("monthly_revenue",), "--partition", "2024-01-01"),
    (("campaign_report",), "--partition-range", "spring_sale...summer_sale"),
]


@pytest.fixture(scope="module")
def shell_env(spark_resource, tmp_path_factory):
    return {
        **os.environ,
        **instance_env(tmp_path_factory.mktemp("dagster_home")),
        "PARTITION_ASSETS_LAKE": str(tmp_path_factory.mktemp("shell") / "lake"),
    }


def dagster_cli(env, *args) -> subprocess.CompletedProcess:
    return subprocess.run([DAGSTER, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)


def test_every_example_asset_has_a_cli_run():
    assert sorted(asset for run in CLI_RUNS for asset in run[0]) == sorted(
        a.key.to_user_string() for a in EXAMPLE_ASSETS
    )


def test_dagster_asset_materialize_from_the_shell(shell_env, spark):
    lake = Path(shell_env["PARTITION_ASSETS_LAKE"])
    with dg.DagsterInstance.from_config(shell_env["DAGSTER_HOME"]) as instance:
        instance.add_dynamic_partitions("campaigns", ["spring_sale", "summer_sale"])

    for assets, flag, keys in CLI_RUNS:
        done = dagster_cli(
            shell_env,
            "asset",
            "materialize",
            "-m",
            "partition_assets.example",
            "--select",
            ",".join(assets),
            flag,
            keys,
        )
        assert done.returncode == 0, f"{assets}: {done.stderr[-3000:]}"

        for asset in assets:
            with dg.DagsterInstance.from_config(shell_env["DAGSTER_HOME"]) as instance:
                expected = _expected_keys(asset, flag, keys, instance)
                assert instance.get_materialized_partitions(dg.AssetKey(asset)) == expected, asset
            # The table holds exactly these partitions, written by one run in one commit.
            assert _stored_partitions(lake, asset) == _scope(asset, expected), asset
            assert DeltaTable(str(lake / asset)).version() == 0, asset

    # The source rows are the generator's, and the range fan-in aggregates them.
    generated = sources.hourly_events(spark, datetime(2024, 1, 1, tzinfo=UTC), 72).toPandas()
    events = DeltaTable(str(lake / "events")).to_pandas()
    assert rows(events, "event_id") == rows(generated, "event_id")
    orders = DeltaTable(str(lake / "daily_orders")).to_pandas().set_index(["ds", "region"]).sort_index()
    expected_orders = expected_daily_orders(generated)
    assert list(orders.index) == list(expected_orders.index)
    assert list(orders.orders) == list(expected_orders.orders)

    # Every run attached to the one shared Spark server; none started a JVM of its own.
    assert _java_processes_started_with(shell_env["DAGSTER_HOME"]) == set()


def _expected_keys(asset: str, flag: str, keys: str, instance: dg.DagsterInstance) -> set[str]:
    if flag == "--partition":
        return {keys}
    partitions_def = _asset_def(asset).partitions_def
    first, last = keys.split("...")
    with dg.partition_loading_context(dynamic_partitions_store=instance):
        return set(partitions_def.get_partition_keys_in_range(dg.PartitionKeyRange(first, last)))


def _asset_def(asset: str) -> dg.AssetsDefinition:
    return next(a for a in EXAMPLE_ASSETS if a.key.to_user_string() == asset)


def _scope(asset: str, keys: set[str]) -> PartitionScope:
    definition = _asset_def(asset)
    columns = partition_columns(definition.partitions_def, definition.metadata_by_key[definition.key])
    return PartitionScope.for_keys(definition.partitions_def, keys, columns)


def _stored_partitions(lake: Path, asset: str) -> PartitionScope:
    columns = _scope(asset, set()).columns
    stored = DeltaTable(str(lake / asset)).to_pandas()
    return PartitionScope(columns, frozenset(map(tuple, stored[list(columns)].values.tolist())))


def test_a_bad_partition_key_fails_clearly_and_writes_nothing(shell_env):
    done = dagster_cli(
        shell_env,
        "asset",
        "materialize",
        "-m",
        "partition_assets.example",
        "--select",
        "monthly_targets",
        "--partition",
        "2024-13-01",
    )
    assert done.returncode != 0
    assert "2024-13-01" in done.stderr


def _java_processes_started_with(dagster_home: str) -> set[str]:
    """The pids of running JVMs whose environment has DAGSTER_HOME=`dagster_home`: those this
    test's runs started, also when detached (a Spark server outlives its run), and none of the
    JVMs other sessions on the machine run (their DAGSTER_HOME is not this test's temp dir)."""
    marker = f"DAGSTER_HOME={dagster_home}".encode()
    found = set()
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                is_java = os.readlink(proc / "exe").endswith("/java")
                if is_java and marker in (proc / "environ").read_bytes().split(b"\0"):
                    found.add(proc.name)
            except OSError:
                continue
    return found


def test_make_dev_serves_the_example_assets_with_their_partitions(tmp_path):
    port = free_port()
    # A user's shell: not the flags of the `make test` this suite may run under (-j, --output-sync).
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")},
        "DAGSTER_HOME": str(tmp_path / "dagster_home"),
        "PARTITION_ASSETS_LAKE": str(tmp_path / "lake"),
        "DAGSTER_PORT": str(port),
    }
    server = subprocess.Popen(
        ["make", "dev"],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        nodes = _graphql_when_up(
            port,
            "{ assetNodes { assetKey { path } partitionDefinition { type dimensionTypes { name } } } }",
        )["assetNodes"]
        by_key = {"/".join(n["assetKey"]["path"]): n["partitionDefinition"] for n in nodes}
        assert set(by_key) == {a.key.to_user_string() for a in EXAMPLE_ASSETS}
        assert by_key["events"]["type"] == "TIME_WINDOW"
        assert by_key["countries"]["type"] == "STATIC"
        assert by_key["campaign_report"]["type"] == "DYNAMIC"
        assert by_key["daily_region_revenue"]["type"] == "MULTIPARTITIONED"
        assert {d["name"] for d in by_key["daily_region_revenue"]["dimensionTypes"]} == {"ds", "region"}

        keys = _graphql_when_up(
            port,
            '{ assetNodeOrError(assetKey: {path: ["monthly_revenue"]}) { ... on AssetNode { partitionKeys } } }',
        )["assetNodeOrError"]["partitionKeys"]
        assert keys[:3] == ["2024-01-01", "2024-02-01", "2024-03-01"]
        assert (Path(env["DAGSTER_HOME"]) / "dagster.yaml").exists()
    finally:
        stop(server)


def _graphql_when_up(port: int, query: str, timeout: float = 240) -> dict:
    def served():
        """the webserver to serve the assets"""
        try:
            data = graphql(port, query, timeout=10)
        except (OSError, RuntimeError):  # not up yet, or its code location still loading
            return None
        return data if data.get("assetNodes") or (data.get("assetNodeOrError") or {}).get("partitionKeys") else None

    return wait_for(served, timeout, step=1)
