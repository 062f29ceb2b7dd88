"""`dagster dev` (webserver + daemon) for tests: a free port, a temp instance and lake, and
a small GraphQL client."""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import AbstractContextManager
from pathlib import Path

import dagster as dg
import yaml

from partition_assets_tests.support import REPO
from partition_assets_tests.support.instances import add_to_config, instance_env, open_instance
from partition_assets_tests.support.polling import wait_for

DAGSTER = str(Path(sys.executable).parent / "dagster")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def listening(port: int) -> bool:
    """Whether something accepts connections on 127.0.0.1:`port`."""
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def stop(process: subprocess.Popen) -> None:
    """Stops a process started with start_new_session=True, and everything it started
    (nothing to do when all of them have exited already)."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        process.wait()
        return
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def graphql(port: int, query: str, variables: dict | None = None, timeout: float = 60) -> dict:
    """The `data` of a GraphQL request; GraphQL errors raise."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql",
        data=json.dumps({"query": query, "variables": variables or {}}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        body = json.loads(response.read())
    if body.get("errors"):
        raise RuntimeError(f"GraphQL errors: {body['errors']}")
    return body["data"]


_READY = """{
  repositoriesOrError { ... on RepositoryConnection { nodes { location { name } } } }
  instance { daemonHealth { daemonStatus(daemonType: "BACKFILL") { healthy } } }
}"""


class DagsterDev:
    """`dagster dev` (webserver, daemon, code server) on a free port, with a fresh instance
    (the repo's dagster.yaml; on PostgreSQL when `postgres_url` is given) and lake under
    `root`: the `make dev` setup, for tests.

    Serves the repo's workspace.yaml, or only `module` when given; `engine_modules`
    replaces the code locations whose UI backfills run on the sparse engine, `backfills`
    what backfills may take (`partition_assets.backfills`, backfill/running/capacity.py).
    """

    def __init__(
        self,
        root: Path,
        module: str | None = None,
        env: dict[str, str] | None = None,
        postgres_url: str | None = None,
        engine_modules: list[str] | None = None,
        backfills: dict[str, int] | None = None,
    ) -> None:
        self.home, self.lake = root / "dagster_home", root / "lake"
        # What a process needs to open the instance this server serves.
        self.instance_env = instance_env(self.home, postgres_url)
        # No "join the community" dialog over the page under test (it comes and goes with
        # a flag in the user's ~/.dagster).
        add_to_config(self.home, nux={"enabled": False})
        settings = yaml.safe_load((self.home / "dagster.yaml").read_text()).get("partition_assets", {})
        if engine_modules is not None:
            settings["engine_modules"] = engine_modules
        if backfills is not None:
            settings["backfills"] = backfills
        add_to_config(self.home, partition_assets=settings)
        self.location = module or "example"
        self.port = free_port()
        self.log = root / "dagster_dev.log"
        self.started = time.monotonic()
        self.process = subprocess.Popen(
            [
                DAGSTER,
                "dev",
                "-h",
                "127.0.0.1",
                "-p",
                str(self.port),
                *(["-m", module] if module else ["-w", "workspace.yaml"]),
            ],
            cwd=REPO,
            env={**os.environ, **self.instance_env, "PARTITION_ASSETS_LAKE": str(self.lake), **(env or {})},
            stdout=self.log.open("wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def graphql(self, query: str, variables: dict | None = None) -> dict:
        return graphql(self.port, query, variables)

    def wait_until_ready(self, timeout: float = 240) -> "DagsterDev":
        """Returns once the code location is served and the daemon is healthy."""

        def ready():
            """dagster dev to serve its code location, with a healthy daemon"""
            try:
                data = self.graphql(_READY)
            except (OSError, RuntimeError):  # not listening yet, or still loading
                return False
            locations = {n["location"]["name"] for n in data["repositoriesOrError"].get("nodes", [])}
            return self.location in locations and data["instance"]["daemonHealth"]["daemonStatus"]["healthy"]

        try:
            wait_for(ready, timeout, step=0.5, alive=[self.process])
        except (TimeoutError, RuntimeError) as error:
            self.stop()
            raise RuntimeError(f"dagster dev did not come up; log: {self.log}") from error
        return self

    def wait_for_standby(self, timeout: float = 120) -> float:
        """Returns once the webserver's standby coordinator (`backfill standby`) has said in its
        log that its workers are loaded; the seconds this took since `dagster dev` started."""
        log = self.home / "partition_assets" / "backfills" / "standby.log"

        def ready():
            """a standby coordinator ready"""
            return log.exists() and re.search(r"^standby \d+ ready$", log.read_text(errors="replace"), re.M)

        try:
            wait_for(ready, timeout, step=0.2)
        except TimeoutError as error:
            raise RuntimeError(f"no standby coordinator was ready within {timeout} s; log: {log}") from error
        return time.monotonic() - self.started

    def open_instance(self) -> AbstractContextManager[dg.DagsterInstance]:
        """The instance this server serves (see instances.open_instance)."""
        return open_instance(self.instance_env)

    def selector(self, **names: str) -> dict[str, str]:
        return {"repositoryLocationName": self.location, "repositoryName": "__repository__", **names}

    def start_sensor(self, name: str) -> None:
        """What the sensor's toggle in the UI does."""
        data = self.graphql(
            "mutation($s: SensorSelector!) { startSensor(sensorSelector: $s) { __typename "
            "... on PythonError { message } } }",
            {"s": self.selector(sensorName=name)},
        )["startSensor"]
        assert data["__typename"] == "Sensor", data

    def stop(self) -> None:
        if self.process.poll() is None:
            stop(self.process)
