"""Deploy the code at a git commit as its own code location.

A deploy is a git worktree of the repository at the commit (`.deploys/<sha12>/`), a
Dagster code server importing the code location from that worktree, and a
`grpc_server` entry in workspace.yaml. Its record (`.deploys/<sha12>.json`) keeps the
server's port and its process's identity (pid and start time, processes/identity.py), so
that `undeploy` stops exactly that server and `deploys` reads a deploy whose server died as
down, also once the kernel handed its pid, and another process its port, to others.

Not guaranteed: a record written before identities were recorded (a bare pid), or read
where /proc does not show the server (not Linux, another pid namespace), trusts its pid.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import yaml

from partition_assets.code_location import configured_module, dagster_config, split_target
from partition_assets.deploy.git import GIT_SHA_ENV, git
from partition_assets.errors import CodeLocationError, DeployError
from partition_assets.processes.detached import start_detached
from partition_assets.processes.identity import ProcessIdentity
from partition_assets.state_formats import DEPLOY_RECORD_FORMAT, FORMAT_FIELD, checked_format

DEPLOYS_DIR = ".deploys"
_HOST = "127.0.0.1"


@dataclass
class Deployment:
    sha: str
    location: str
    module: str
    port: int
    pid: int
    worktree: str
    workspace: str
    log: str
    host: str = _HOST
    # The code server's process (None in a record written before identities were recorded).
    server: ProcessIdentity | None = None

    @property
    def short_sha(self) -> str:
        return self.sha[:12]

    @property
    def process(self) -> ProcessIdentity:
        """The code server's process, as recorded; a record without its identity names its pid alone."""
        return self.server or ProcessIdentity(socket.gethostname(), self.pid)

    def is_serving(self) -> bool:
        """Whether the code server this deploy started still runs, and something listens on
        its port: a pid the kernel has since given to another process is not it."""
        try:
            with socket.create_connection((self.host, self.port), timeout=1):
                return _runs(self.process)
        except OSError:
            return False


def repo_root(path: str | Path = ".") -> Path:
    try:
        return Path(git(path, "rev-parse", "--show-toplevel"))
    except subprocess.CalledProcessError:
        raise DeployError(f"{Path(path).resolve()} is not inside a git work tree") from None


def deploy(
    repo: Path,
    sha: str,
    *,
    module: str | None = None,
    location: str | None = None,
    port: int | None = None,
    workspace: Path | None = None,
    timeout: float = 180,
) -> Deployment:
    """Serves the code location at commit `sha` of `repo` and registers it in the workspace."""
    try:
        full_sha = git(repo, "rev-parse", "--verify", f"{sha}^{{commit}}")
    except subprocess.CalledProcessError:
        raise DeployError(f"{sha!r} is not a commit of {repo}") from None
    deploys = repo / DEPLOYS_DIR
    existing = _record_path(repo, full_sha)
    if existing.exists() and load_deployment(existing).is_serving():
        raise DeployError(f"{full_sha[:12]} is already deployed; `partition-assets undeploy {full_sha[:12]}` first")
    if port is not None and not _port_is_free(port):
        raise DeployError(f"port {port} is in use: pick another with --port, or leave it out for a free one")
    worktree = deploys / full_sha[:12]
    created = not worktree.exists()
    if created:
        git(repo, "worktree", "add", "--detach", str(worktree), full_sha)
    try:
        deployment = _start_server(repo, full_sha, worktree, module, location, port, workspace, timeout)
    except DeployError:
        if created:  # a refused deploy leaves only the server's log, which its error names
            git(repo, "worktree", "remove", "--force", str(worktree))
        raise
    save_deployment(repo, deployment)
    _register(Path(deployment.workspace), deployment)
    return deployment


def _start_server(
    repo: Path,
    full_sha: str,
    worktree: Path,
    module: str | None,
    location: str | None,
    port: int | None,
    workspace: Path | None,
    timeout: float,
) -> Deployment:
    """Starts the code server of `worktree` and waits until its code has loaded."""
    deploys = repo / DEPLOYS_DIR
    configured = dagster_config(worktree)
    try:
        module = module or configured_module(worktree)
    except CodeLocationError as error:
        raise DeployError(f"name the code location's module (-m): {error}") from None
    module_name, attribute = split_target(module)
    location = location or f"{configured.get('code_location_name', module_name)}@{full_sha[:12]}"
    port = port or _free_port()
    log = deploys / f"{full_sha[:12]}.log"
    env = {
        **os.environ,
        # The worktree first: the location's modules (and this package, when the worktree
        # holds it) are imported from the commit, not from the installed checkout.
        "PYTHONPATH": os.pathsep.join([str(worktree), *filter(None, [os.environ.get("PYTHONPATH")])]),
        GIT_SHA_ENV: full_sha,  # the stamp, should the worktree's .git be unreadable
    }
    with open(log, "ab") as out:
        server = start_detached(
            # -P: no current directory on sys.path (it is the repo at another commit).
            [
                sys.executable,
                "-P",
                "-m",
                "dagster",
                "api",
                "grpc",
                "-m",
                module_name,
                *(["-a", attribute] if attribute else []),
                "-d",
                str(worktree),
                "-h",
                _HOST,
                "-p",
                str(port),
                "--location-name",
                location,
                "--use-python-environment-entry-point",
            ],
            # The caller's directory: relative settings (e.g. the example's .lake) mean the same.
            cwd=Path.cwd(),
            env=env,
            stdout=out,
        )
    deployment = Deployment(
        full_sha,
        location,
        module,
        port,
        server.pid,
        str(worktree),
        str((workspace or repo / "workspace.yaml").resolve()),
        str(log),
        server=ProcessIdentity.of_pid(server.pid),
    )
    try:
        _wait_until_loaded(deployment, server, timeout)
    except DeployError:
        _stop(deployment.process)
        raise
    return deployment


def deployments(repo: Path) -> list[Deployment]:
    folder = repo / DEPLOYS_DIR
    return [load_deployment(p) for p in sorted(folder.glob("*.json"))] if folder.exists() else []


def find_deployment(repo: Path, name: str) -> Deployment:
    """The deploy whose location name is `name`, or whose commit starts with `name`."""
    found = [d for d in deployments(repo) if name in (d.location, d.short_sha) or d.sha.startswith(name)]
    if len(found) != 1:
        known = ", ".join(d.location for d in deployments(repo)) or "none"
        raise DeployError(f"{len(found)} deploys match {name!r} under {repo / DEPLOYS_DIR}; deployed: {known}")
    return found[0]


def undeploy(repo: Path, name: str) -> Deployment:
    """Stops the deploy's code server, unregisters it and removes its worktree."""
    deployment = find_deployment(repo, name)
    if _runs(deployment.process) and _serves(deployment.pid, deployment.location):
        _stop(deployment.process)
    _unregister(Path(deployment.workspace), deployment.location)
    git(repo, "worktree", "remove", "--force", deployment.worktree)
    _record_path(repo, deployment.sha).unlink()
    Path(deployment.log).unlink(missing_ok=True)
    return deployment


def save_deployment(repo: Path, deployment: Deployment) -> None:
    """Writes `deployment`'s record under `repo`'s deploys folder."""
    record = {FORMAT_FIELD: DEPLOY_RECORD_FORMAT, **asdict(deployment)}
    _record_path(repo, deployment.sha).write_text(json.dumps(record, indent=2))


def load_deployment(path: Path) -> Deployment:
    """The deploy `path` records; one an earlier release wrote has no format (state_formats.py).

    Raises:
        StateFormatError: The record is in a newer format (a newer release wrote it); nothing was written.
    """
    fields = json.loads(path.read_text())
    checked_format(fields, DEPLOY_RECORD_FORMAT, f"the deploy record {path}")
    fields.pop(FORMAT_FIELD, None)
    server = fields.pop("server", None)
    return Deployment(**fields, server=ProcessIdentity(**server) if server else None)


def _record_path(repo: Path, sha: str) -> Path:
    return repo / DEPLOYS_DIR / f"{sha[:12]}.json"


def _port_is_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind((_HOST, port))
        except OSError:
            return False
        return True


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind((_HOST, 0))
        return probe.getsockname()[1]


def _wait_until_loaded(deployment: Deployment, server: subprocess.Popen, timeout: float) -> None:
    # The client Dagster's own tools use to talk to a code server.
    from partition_assets.dagster_internals import (
        DagsterGrpcClient,
        DagsterUserCodeUnreachableError,
        SerializableErrorInfo,
        deserialize_value,
    )

    client = DagsterGrpcClient(port=deployment.port, host=deployment.host)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise DeployError(
                f"the code server exited ({server.returncode}): {_last_line(deployment.log)}; see {deployment.log}"
            )
        try:
            loaded = deserialize_value(client.list_repositories())
        except DagsterUserCodeUnreachableError:  # not serving yet
            time.sleep(0.2)
            continue
        if isinstance(loaded, SerializableErrorInfo):
            # The whole traceback goes to the log; the message keeps the error's own last line.
            with open(deployment.log, "a") as log:
                log.write(loaded.to_string())
            reason = (loaded.message.strip().splitlines() or ["(no message)"])[-1]
            raise DeployError(
                f"{deployment.module} at {deployment.short_sha} failed to load: {reason}; traceback in {deployment.log}"
            )
        return
    raise DeployError(f"the code server did not serve within {timeout:.0f} s; see {deployment.log}")


def _last_line(log: str) -> str:
    """The last line a server wrote to its log: usually the error it stopped on."""
    lines = [line.strip() for line in Path(log).read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1] if lines else "it wrote nothing"


def _register(workspace: Path, deployment: Deployment) -> None:
    config = _read_workspace(workspace)
    entries = [e for e in config["load_from"] if _location_name(e) != deployment.location]
    entries.append(
        {"grpc_server": {"host": deployment.host, "port": deployment.port, "location_name": deployment.location}}
    )
    _write_workspace(workspace, {**config, "load_from": entries})


def _unregister(workspace: Path, location: str) -> None:
    config = _read_workspace(workspace)
    _write_workspace(
        workspace, {**config, "load_from": [e for e in config["load_from"] if _location_name(e) != location]}
    )


def _read_workspace(workspace: Path) -> dict:
    config = (yaml.safe_load(workspace.read_text()) if workspace.exists() else None) or {}
    config.setdefault("load_from", [])
    return config


class _IndentedDumper(yaml.SafeDumper):
    """Indents list items under their key, as workspace.yaml is written by hand."""

    def increase_indent(self, flow: bool = False, indentless: bool = False):
        return super().increase_indent(flow, False)


def _write_workspace(workspace: Path, config: dict) -> None:
    temporary = workspace.with_suffix(f".{os.getpid()}.tmp")
    temporary.write_text(yaml.dump(config, Dumper=_IndentedDumper, sort_keys=False))
    temporary.replace(workspace)  # `dagster dev` never reads half a file


def _location_name(entry: dict) -> str | None:
    ((_, options),) = entry.items()
    return (options or {}).get("location_name")


def _serves(pid: int, location: str) -> bool:
    """Whether the live process `pid` runs the code server of `location` (its command line
    names it: a record without the server's start time is checked so at least)."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return True  # no /proc (macOS): trust the record
    return location.encode() in command


def _runs(process: ProcessIdentity) -> bool:
    """Whether `process` still runs: its pid names a live process, and not provably another
    one (processes/identity.py: a pid handed on since has another start time)."""
    try:
        os.kill(process.pid, 0)
    except ProcessLookupError:
        return False
    return not process.is_gone()


def _stop(server: ProcessIdentity, grace: float = 10) -> None:
    """Stops the code server `server` and its run processes (its own process group),
    signalling the group only while its leader is still that process."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not _runs(server):
            return
        try:
            os.killpg(server.pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            try:
                if os.waitpid(server.pid, os.WNOHANG) != (0, 0):
                    return
            except ChildProcessError:  # not our child: started by an earlier `deploy`
                if not _runs(server):
                    return
            time.sleep(0.1)
