"""Scaling Spark out: the example's backfill on a Spark standalone cluster, and attached
to a Spark Connect server started by someone else.

Every JVM here comes from pyspark's own distribution (`bin/spark-class`,
`bin/spark-submit`), listens on 127.0.0.1 at free ports, runs in its own process
group and is stopped when its fixture ends, even when the test fails. The test
session's shared Spark server is never touched: each test gives the backfill its
own Connect port and state folder. Expected rows come from the example's
generators on the shared server.
"""

import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest
from deltalake import DeltaTable

from partition_assets.example import sources
from partition_assets.spark import LocalConnectServer, find_java
from partition_assets.spark.connect_server import spark_env, spark_home
from partition_assets_tests.support.cli_runs import run_cli
from partition_assets_tests.support.example_tables import rows
from partition_assets_tests.support.instances import instance_env
from partition_assets_tests.support.polling import wait_for
from partition_assets_tests.support.webserver import free_port, listening, stop

pytestmark = pytest.mark.slow

# Six hourly events partitions and the six-hour window over them: with two slots the
# engine runs them as three Dagster runs (two ranges of events, then the window).
FIRST_HOUR, LAST_HOUR = datetime(2024, 1, 1, 0, tzinfo=UTC), datetime(2024, 1, 1, 5, tzinfo=UTC)
HOURS = 6
# What a user sizes for a cluster (README "Scaling out"): the Connect server's driver,
# each executor, the cores the application takes from the cluster, and per-session
# shuffle partitions. The worker below offers 1 core and 1 GiB.
CLUSTER_CONF = {
    "spark.driver.memory": "1g",
    "spark.executor.memory": "512m",
    "spark.executor.cores": 1,
    "spark.cores.max": 1,
    "spark.sql.shuffle.partitions": 4,
}


@dataclass(frozen=True)
class StandaloneCluster:
    master_url: str
    master_ui: str
    worker_ui: str
    work_dir: Path


@pytest.fixture
def standalone_cluster(tmp_path) -> Iterator[StandaloneCluster]:
    """A Spark standalone master and one worker (1 core, 1 GiB) on 127.0.0.1."""
    master_port, master_ui_port, worker_ui_port = free_port(), free_port(), free_port()
    cluster = StandaloneCluster(
        master_url=f"spark://127.0.0.1:{master_port}",
        master_ui=f"http://127.0.0.1:{master_ui_port}",
        worker_ui=f"http://127.0.0.1:{worker_ui_port}",
        work_dir=tmp_path / "worker",
    )
    started = []
    try:
        master_args = ["--host", "127.0.0.1", "--port", str(master_port), "--webui-port", str(master_ui_port)]
        started.append(spark_class(tmp_path / "master.log", "org.apache.spark.deploy.master.Master", *master_args))
        worker_args = [cluster.master_url, "--host", "127.0.0.1", "--cores", "1", "--memory", "1g"]
        worker_args += ["--webui-port", str(worker_ui_port), "--work-dir", str(cluster.work_dir)]
        started.append(spark_class(tmp_path / "worker.log", "org.apache.spark.deploy.worker.Worker", *worker_args))

        def registered():
            """a worker registered"""
            return status(cluster.master_ui).get("aliveworkers") == 1

        wait_for(registered, 120, step=0.5, alive=started)
        yield cluster
    finally:
        for process in reversed(started):
            stop(process)


def spark_class(log: Path, main_class: str, *args: str) -> subprocess.Popen:
    """`<pyspark>/bin/spark-class main_class args` in its own process group."""
    with open(log, "wb") as output:
        return subprocess.Popen(
            [str(spark_home() / "bin" / "spark-class"), main_class, *args],
            stdout=output,
            stderr=subprocess.STDOUT,
            env=spark_process_env(),
            start_new_session=True,
        )


def spark_process_env() -> dict[str, str]:
    # SPARK_LOCAL_IP keeps every service on the loopback; the standalone master's REST
    # submission server would otherwise take the fixed port 6066.
    return {
        **os.environ,
        **spark_env(find_java()),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
    }


def status(ui: str, path: str = "/json/") -> dict:
    """A Spark web UI's JSON status; {} while it is not serving it yet (no answer, or a
    "starting up" page)."""
    try:
        with urllib.request.urlopen(f"{ui}{path}", timeout=30) as response:
            return json.load(response)
    except (OSError, json.JSONDecodeError):
        return {}


@pytest.fixture
def backfill_env(tmp_path) -> Iterator[dict[str, str]]:
    """A temp DAGSTER_HOME, lake and state folder, and a Connect port of the test's own.

    Stops any Spark Connect server the backfill starts on that port.
    """
    env = {
        **os.environ,
        **instance_env(tmp_path / "dagster_home"),
        "PARTITION_ASSETS_LAKE": str(tmp_path / "lake"),
        "PARTITION_ASSETS_STATE_DIR": str(tmp_path / "state"),
        "PARTITION_ASSETS_SPARK_CONNECT_PORT": str(free_port()),
    }
    yield env
    own_server(env).stop()


def own_server(env: dict[str, str]) -> LocalConnectServer:
    """The local Connect server our code starts for `env`, whether or not it runs."""
    return LocalConnectServer(
        port=int(env["PARTITION_ASSETS_SPARK_CONNECT_PORT"]), state_dir=Path(env["PARTITION_ASSETS_STATE_DIR"])
    )


def run_example_backfill(env: dict[str, str]) -> None:
    """`partition-assets backfill run` of events and events_6h over HOURS hours, as a user runs it."""
    done = run_cli(
        *["backfill", "run", "-m", "partition_assets.example", "--select", "key:events or key:events_6h"],
        *["--max-parallel", "2", "--start", FIRST_HOUR.isoformat(), "--end", LAST_HOUR.isoformat()],
        env=env,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def assert_tables_equal_the_generator(lake: Path, spark) -> None:
    generated = sources.hourly_events(spark, FIRST_HOUR, HOURS).toPandas()
    events = DeltaTable(str(lake / "events")).to_pandas()
    assert len(events) == HOURS * sources.EVENTS_PER_HOUR
    assert rows(events, "event_id") == rows(generated, "event_id")
    (window,) = DeltaTable(str(lake / "events_6h")).to_pandas().itertuples()
    assert (window.ds, window.events) == ("2024-01-01-00:00", len(generated))
    assert float(window.revenue) == pytest.approx(float(generated.amount.astype(float).sum()))


def session_settings(env: dict[str, str], keys: list[str]) -> dict[str, str]:
    """The settings a run's session sees: `SparkResource.from_env()` in a fresh process."""
    script = (
        "import json, sys\n"
        "from partition_assets.spark import SparkResource\n"
        "session = SparkResource.from_env().spark_session\n"
        "print(json.dumps({key: session.conf.get(key) for key in sys.argv[1:]}))\n"
        "session.stop()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, *keys], env=env, capture_output=True, text=True, timeout=120, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_example_backfill_runs_on_a_standalone_cluster(standalone_cluster, backfill_env, spark):
    env = {
        **backfill_env,
        "PARTITION_ASSETS_SPARK_MASTER": standalone_cluster.master_url,
        "PARTITION_ASSETS_SPARK_CONF": json.dumps(CLUSTER_CONF),
    }
    run_example_backfill(env)

    # The first node run started our Connect server, whose driver is an application of the cluster
    # holding exactly the cores and executor memory configured.
    server = own_server(env)
    assert server.is_running()
    apps = [
        app for app in status(standalone_cluster.master_ui)["activeapps"] if app["name"].endswith(f":{server.port}")
    ]
    assert [(app["cores"], app["memoryperexecutor"], app["state"]) for app in apps] == [(1, 512, "RUNNING")]
    app_id = apps[0]["id"]
    driver_cmdline = Path(f"/proc/{server.recorded_server().pid}/cmdline").read_bytes().split(b"\0")
    assert b"-Xmx1g" in driver_cmdline

    # Its one executor runs on the worker, and that executor ran the tasks that wrote the staged
    # files of both tables into the lake.
    executors = status(standalone_cluster.worker_ui)["executors"]
    assert [(e["appid"], e["memory"]) for e in executors] == [(app_id, 512)]
    executor_log = (standalone_cluster.work_dir / app_id / str(executors[0]["id"]) / "stderr").read_text()
    assert "Finished task" in executor_log
    for table in ("events", "events_6h"):
        assert f"to file:{env['PARTITION_ASSETS_LAKE']}/{table}/" in executor_log, table

    settings = session_settings(env, ["spark.master", "spark.executor.memory", "spark.sql.shuffle.partitions"])
    assert settings == {
        "spark.master": standalone_cluster.master_url,
        "spark.executor.memory": "512m",
        "spark.sql.shuffle.partitions": "4",
    }
    assert_tables_equal_the_generator(Path(env["PARTITION_ASSETS_LAKE"]), spark)


@dataclass(frozen=True)
class ConnectServer:
    url: str
    ui: str


@pytest.fixture
def separate_connect_server(tmp_path) -> Iterator[ConnectServer]:
    """A Spark Connect server started with pyspark's `bin/spark-submit`, not by partition_assets."""
    port, ui_port = free_port(), free_port()
    args = ["--class", "org.apache.spark.sql.connect.service.SparkConnectServer", "--master", "local[2]"]
    args += ["--driver-memory", "1g", "--conf", f"spark.connect.grpc.binding.port={port}"]
    args += ["--conf", "spark.connect.grpc.binding.address=127.0.0.1", "--conf", f"spark.ui.port={ui_port}"]
    with open(tmp_path / "connect-server.log", "wb") as output:
        process = subprocess.Popen(
            [str(spark_home() / "bin" / "spark-submit"), *args, "spark-internal"],
            stdout=output,
            stderr=subprocess.STDOUT,
            env=spark_process_env(),
            start_new_session=True,
        )
    server = ConnectServer(url=f"sc://127.0.0.1:{port}", ui=f"http://127.0.0.1:{ui_port}")
    try:
        # Its status API answers once its SparkContext runs; gRPC listens a few seconds later.
        def serving():
            """the Spark Connect server"""
            return bool(status(server.ui, "/api/v1/applications")) and listening(port)

        wait_for(serving, 120, step=0.5, alive=[process])
        yield server
    finally:
        stop(process)


def succeeded_jobs(server: ConnectServer) -> int:
    (application,) = status(server.ui, "/api/v1/applications")
    jobs = status(server.ui, f"/api/v1/applications/{application['id']}/jobs")
    return sum(job["status"] == "SUCCEEDED" for job in jobs)


def test_runs_attach_to_a_separately_started_connect_server(separate_connect_server, backfill_env, spark):
    env = {**backfill_env, "PARTITION_ASSETS_SPARK_REMOTE": separate_connect_server.url}
    jobs_before = succeeded_jobs(separate_connect_server)

    run_example_backfill(env)

    # The server ran the work, and our code started no server of its own.
    assert succeeded_jobs(separate_connect_server) > jobs_before
    assert not own_server(env).is_running()
    assert not list(Path(env["PARTITION_ASSETS_STATE_DIR"]).glob("spark-connect-*"))
    assert_tables_equal_the_generator(Path(env["PARTITION_ASSETS_LAKE"]), spark)
