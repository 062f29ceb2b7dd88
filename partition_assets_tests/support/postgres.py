"""A throwaway PostgreSQL server for tests and benchmarks, to hold Dagster instances
(instances.py writes their dagster.yaml).

The server: the machine's PostgreSQL binaries (Debian's `postgresql`, which `make test`
installs), `initdb` into a temp dir, listening on 127.0.0.1 at a free port only, trust
authentication for the `postgres` role, one fresh database per caller (`create_database`).
When this process is root, the server runs as the unprivileged `postgres` user (Debian's
package creates it) or else `nobody`, because PostgreSQL refuses to run as root.

Not guaranteed: durability past a crash of the machine (fsync is off; everything is deleted by `stop`); that the free
port is still free when the server binds it (start then fails with the server's log);
security (any local process may connect while it runs).
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shlex
import shutil
import subprocess
import tempfile
from contextlib import closing
from pathlib import Path

import psycopg2

from partition_assets_tests.support.webserver import free_port

# Settings for a server whose data is thrown away: no waiting for disks; room for the
# connections of a `dagster dev` (webserver, daemon threads, runs) and the engine's workers.
# Commits write the WAL before they answer (synchronous_commit, without fsync: no disk wait),
# so that what a server `crash` acknowledged survives it, as on a real server.
_SERVER_SETTINGS = {"fsync": "off", "synchronous_commit": "on", "full_page_writes": "off", "max_connections": "200"}
_UNPRIVILEGED_USERS = ("postgres", "nobody")


def server_binaries() -> Path:
    """The folder holding `initdb` and `pg_ctl`: on PATH, else Debian's newest
    /usr/lib/postgresql/<version>/bin."""
    on_path = shutil.which("pg_ctl")
    if on_path and shutil.which("initdb"):
        return Path(on_path).resolve().parent
    debian = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(Path(p).parts[-3]))
    if not debian:
        raise FileNotFoundError(
            "no PostgreSQL server binaries (pg_ctl, initdb) on PATH or in /usr/lib/postgresql/*/bin: "
            "`make test` installs Debian's postgresql (or: apt-get install postgresql)"
        )
    return Path(debian[-1]).parent


# How often `pg_ctl start` is run when it dies by a signal (PostgresServer._start_server).
_PG_CTL_ATTEMPTS = 2


class PostgresServer:
    """A throwaway PostgreSQL server on 127.0.0.1 (see the module docstring). Use as a
    context manager, or call `start` and `stop`."""

    def __init__(self) -> None:
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="partition-assets-pg-"))
        self.data, self.log = self.root / "data", self.root / "server.log"
        self._bin = server_binaries()
        self._user = _unprivileged_user() if os.geteuid() == 0 else None
        self._databases = itertools.count(1)

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def url(self, database: str) -> str:
        """The SQLAlchemy URL Dagster's postgres_url takes. It names the psycopg2 driver that
        dagster-postgres installs: SQLAlchemy 2.1 reads a bare postgresql:// as psycopg 3."""
        return f"postgresql+psycopg2://postgres@127.0.0.1:{self.port}/{database}"

    def start(self) -> PostgresServer:
        """initdb, then start the server and wait until it accepts connections."""
        if self._user is not None:
            os.chown(self.root, self._user.pw_uid, self._user.pw_gid)
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C")
        self._start_server()
        return self

    def crash_and_restart(self) -> None:
        """`crash`, then `start_again`."""
        self.crash()
        self.start_again()

    def crash(self) -> None:
        """`pg_ctl stop -m immediate`: as a crash, no checkpoint, every connection cut (recovery
        from the WAL on the next start)."""
        self._run("pg_ctl", "stop", "-w", "-m", "immediate", "-D", str(self.data))

    def start_again(self) -> None:
        """Starts the server stopped by `crash` on the same port and data."""
        self._start_server()

    def _start_server(self) -> None:
        """`pg_ctl start`, once more when pg_ctl itself died by a signal before it started the
        server (seen once under load: SIGSEGV, the server's log untouched): the server and its
        data are not at fault, and a test crashing the server would otherwise wait for it in vain."""
        options = ["-h", "127.0.0.1", "-p", str(self.port), "-k", str(self.root)]
        options += [arg for name, value in _SERVER_SETTINGS.items() for arg in ("-c", f"{name}={value}")]
        start = ["start", "-w", "-t", "60", "-D", str(self.data), "-l", str(self.log), "-o", shlex.join(options)]
        for attempt in range(_PG_CTL_ATTEMPTS):
            try:
                self._run("pg_ctl", *start)
                return
            except subprocess.CalledProcessError as error:
                killed = error.returncode < 0 and not (self.data / "postmaster.pid").exists()
                if killed and attempt + 1 < _PG_CTL_ATTEMPTS:
                    continue
                log = self.log.read_text() if self.log.exists() else "(no log)"
                raise RuntimeError(f"PostgreSQL did not start on 127.0.0.1:{self.port}; its log:\n{log}") from error

    def create_database(self) -> str:
        """A new, empty database; returns its URL."""
        name = f"db_{next(self._databases)}"
        with closing(
            psycopg2.connect(host="127.0.0.1", port=self.port, user="postgres", dbname="postgres")
        ) as connection:
            connection.autocommit = True  # CREATE DATABASE cannot run inside a transaction
            with connection.cursor() as cursor:
                cursor.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def stop(self) -> None:
        """Stops the server (fast shutdown: open connections are closed) and deletes its files."""
        if (self.data / "postmaster.pid").exists():
            self._run("pg_ctl", "stop", "-w", "-m", "fast", "-D", str(self.data))
        shutil.rmtree(self.root, ignore_errors=True)

    def _run(self, program: str, *args: str) -> None:
        user = self._user
        subprocess.run(
            [str(self._bin / program), *args],
            cwd=self.root,
            check=True,
            capture_output=True,
            **({"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []} if user else {}),
        )


def _unprivileged_user() -> pwd.struct_passwd:
    for name in _UNPRIVILEGED_USERS:
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    raise KeyError(f"running as root, and none of the users {_UNPRIVILEGED_USERS} exists to run PostgreSQL as")
