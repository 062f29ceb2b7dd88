"""The product from the shell, as a user runs it: `dagster asset materialize` and `make dev`."""

import json
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import dagster as dg
import pytest
from deltalake import DeltaTable

from partition_assets_tests.conftest import EXAMPLE_ASSETS

REPO = Path(__file__).resolve().parents[1]
DAGSTER = str(Path(os.sys.executable).parent / "dagster")

pytestmark = pytest.mark.slow

# Every example asset, upstream first, with the partition (or range) a user would pick.
CLI_RUNS = [
    ("events", "--partition-range", "2024-01-01-00:00...2024-01-01-23:00"),
    ("events_6h", "--partition", "2024-01-01-06:00"),
    ("countries", "--partition-range", "br...us"),
    ("regions", "--partition-range", "amer...emea"),
    ("daily_orders", "--partition", "2024-01-01"),
    ("daily_region_revenue", "--partition", "2024-01-01|emea"),
    ("region_revenue_7d", "--partition", "2024-01-01|emea"),
    ("daily_revenue", "--partition", "2024-01-01"),
    ("revenue_7d", "--partition", "2024-01-01"),
    ("revenue_running_total", "--partition", "2024-01-01"),
    ("weekly_revenue", "--partition", "2024-01-01"),
    ("monthly_revenue", "--partition", "2024-01-01"),
    ("monthly_targets", "--partition", "2024-01-01"),
    ("daily_target_attainment", "--partition", "2024-01-01"),
    ("campaign_report", "--partition", "spring_sale"),
]


@pytest.fixture(scope="module")
def shell_env(spark_resource, tmp_path_factory):
    home = tmp_path_factory.mktemp("dagster_home")
    shutil.copy(REPO / "dagster.yaml", home / "dagster.yaml")
    return {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "PARTITION_ASSETS_LAKE": str(tmp_path_factory.mktemp("shell") / "lake"),
    }


def dagster_cli(env, *args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [DAGSTER, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )


def test_every_example_asset_has_a_cli_run():
    assert sorted(run[0] for run in CLI_RUNS) == sorted(a.key.to_user_string() for a in EXAMPLE_ASSETS)


def test_dagster_asset_materialize_from_the_shell(shell_env):
    lake = Path(shell_env["PARTITION_ASSETS_LAKE"])
    with dg.DagsterInstance.from_config(shell_env["DAGSTER_HOME"]) as instance:
        instance.add_dynamic_partitions("campaigns", ["spring_sale"])
    jvms_before = _java_processes()

    for asset, flag, keys in CLI_RUNS:
        done = dagster_cli(
            shell_env, "asset", "materialize", "-m", "partition_assets.example",
            "--select", asset, flag, keys,
        )
        assert done.returncode == 0, f"{asset}: {done.stderr[-3000:]}"

        expected = _expected_keys(asset, flag, keys)
        with dg.DagsterInstance.from_config(shell_env["DAGSTER_HOME"]) as instance:
            assert instance.get_materialized_partitions(dg.AssetKey(asset)) == expected, asset
        stored = DeltaTable(str(lake / asset)).to_pandas()
        assert len(stored) > 0, asset

    # Every run attached to the one shared Spark server; none started a JVM of its own.
    assert _java_processes() == jvms_before


def _expected_keys(asset: str, flag: str, keys: str) -> set[str]:
    if flag == "--partition":
        return {keys}
    partitions_def = next(a for a in EXAMPLE_ASSETS if a.key.to_user_string() == asset).partitions_def
    first, last = keys.split("...")
    return set(partitions_def.get_partition_keys_in_range(dg.PartitionKeyRange(first, last)))


def test_a_bad_partition_key_fails_clearly_and_writes_nothing(shell_env):
    done = dagster_cli(
        shell_env, "asset", "materialize", "-m", "partition_assets.example",
        "--select", "monthly_targets", "--partition", "2024-13-01",
    )
    assert done.returncode != 0
    assert "2024-13-01" in done.stderr


def _java_processes() -> set[str]:
    found = set()
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if os.readlink(proc / "exe").endswith("/java"):
                    found.add(proc.name)
            except OSError:
                continue
    return found


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_make_dev_serves_the_example_assets_with_their_partitions(tmp_path):
    port = _free_port()
    env = {
        **os.environ,
        "DAGSTER_HOME": str(tmp_path / "dagster_home"),
        "PARTITION_ASSETS_LAKE": str(tmp_path / "lake"),
        "DAGSTER_PORT": str(port),
    }
    server = subprocess.Popen(
        ["make", "dev"], cwd=REPO, env=env, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, start_new_session=True,
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
            '{ assetNodeOrError(assetKey: {path: ["monthly_revenue"]}) '
            "{ ... on AssetNode { partitionKeys } } }",
        )["assetNodeOrError"]["partitionKeys"]
        assert keys[:3] == ["2024-01-01", "2024-02-01", "2024-03-01"]
        assert (Path(env["DAGSTER_HOME"]) / "dagster.yaml").exists()
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)


def _graphql_when_up(port: int, query: str, timeout: float = 240) -> dict:
    deadline = time.monotonic() + timeout
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql",
        data=json.dumps({"query": query}).encode(),
        headers={"Content-Type": "application/json"},
    )
    while True:
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                body = json.loads(response.read())
            data = body.get("data") or {}
            if data.get("assetNodes") or data.get("assetNodeOrError", {}).get("partitionKeys"):
                return data
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"the webserver on port {port} did not serve the assets")
        time.sleep(1)
