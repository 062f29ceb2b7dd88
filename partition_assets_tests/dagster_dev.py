"""`dagster dev` (webserver, daemon, code server) on a free port and a temp DAGSTER_HOME,
with the repo's dagster.yaml: the `make dev` setup, for tests that need the daemon."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class DagsterDev:
    """Serves `module` as the code location `location`; `graphql()` talks to its webserver."""

    def __init__(self, home: Path, module: str, env: dict[str, str] | None = None) -> None:
        self.home = home
        self.module = module
        self.location = module
        home.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / "dagster.yaml", home / "dagster.yaml")
        self.port = free_port()
        self.log = home / "dagster_dev.log"
        self._process = subprocess.Popen(
            [str(Path(sys.executable).parent / "dagster"), "dev", "-h", "127.0.0.1", "-p", str(self.port),
             "-m", module],
            cwd=REPO, env={**os.environ, "DAGSTER_HOME": str(home), **(env or {})},
            stdout=self.log.open("w"), stderr=subprocess.STDOUT, start_new_session=True,
        )

    def graphql(self, query: str, variables: dict | None = None) -> dict:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/graphql",
            data=json.dumps({"query": query, "variables": variables or {}}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            body = json.loads(response.read())
        if body.get("errors"):
            raise RuntimeError(body["errors"])
        return body["data"]

    def wait_until_loaded(self, timeout: float = 240) -> None:
        deadline = time.monotonic() + timeout
        query = "{ repositoriesOrError { ... on RepositoryConnection { nodes { location { name } } } } }"
        while time.monotonic() < deadline:
            assert self._process.poll() is None, f"dagster dev exited; see {self.log}"
            try:
                nodes = self.graphql(query)["repositoriesOrError"].get("nodes", [])
                if any(n["location"]["name"] == self.location for n in nodes):
                    return
            except OSError:
                pass
            time.sleep(0.5)
        raise TimeoutError(f"dagster dev did not load {self.module} in {timeout} s; see {self.log}")

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
        os.killpg(self._process.pid, signal.SIGTERM)
        try:
            self._process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self._process.pid, signal.SIGKILL)
            self._process.wait()
