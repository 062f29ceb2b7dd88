"""`dagster dev` (webserver + daemon) for tests: a free port, a temp instance and lake, and
a small GraphQL client."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DAGSTER = str(Path(sys.executable).parent / "dagster")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def stop(process: subprocess.Popen) -> None:
    """Stops a process started with start_new_session=True, and everything it started."""
    os.killpg(process.pid, signal.SIGTERM)
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


@dataclass
class DagsterDev:
    port: int
    home: Path
    lake: Path
    process: subprocess.Popen

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def graphql(self, query: str, variables: dict | None = None) -> dict:
        return graphql(self.port, query, variables)


_READY = """{
  assetNodes { id }
  instance { daemonHealth { daemonStatus(daemonType: "BACKFILL") { healthy } } }
}"""


def start_dagster_dev(root: Path, timeout: float = 240) -> DagsterDev:
    """`dagster dev` on the repo's workspace with a fresh instance and lake under `root`;
    returns once the assets are served and the backfill daemon is healthy."""
    home, lake = root / "dagster_home", root / "lake"
    home.mkdir(parents=True)
    shutil.copy(REPO / "dagster.yaml", home / "dagster.yaml")
    # No "join the community" dialog over the page under test (it comes and goes with
    # a flag in the user's ~/.dagster).
    with open(home / "dagster.yaml", "a") as config:
        config.write("nux:\n  enabled: false\n")
    port = free_port()
    log = open(root / "dagster_dev.log", "wb")
    process = subprocess.Popen(
        [DAGSTER, "dev", "-h", "127.0.0.1", "-p", str(port), "-w", "workspace.yaml"],
        cwd=REPO,
        env={**os.environ, "DAGSTER_HOME": str(home), "PARTITION_ASSETS_LAKE": str(lake)},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    server = DagsterDev(port, home, lake, process)
    deadline = time.monotonic() + timeout
    while True:
        try:
            data = server.graphql(_READY)
            if data["assetNodes"] and data["instance"]["daemonHealth"]["daemonStatus"]["healthy"]:
                return server
        except (OSError, RuntimeError):
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            if process.poll() is None:
                stop(process)
            raise RuntimeError(f"dagster dev did not come up; log: {root / 'dagster_dev.log'}")
        time.sleep(1)
