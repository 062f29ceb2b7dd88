"""The coordinator processes that run the webserver's backfills: a warm standby, else a new
detached one per backfill.

Contract:
- `start_coordinator(home, modules, backfill_id)` gives a Dagster backfill launched in this
  process (the webserver's `launchPartitionBackfill`) to a coordinator process of the
  instance at `home` with engine code locations `modules`: this process's standby for
  them, if it is alive (it is handed the id on stdin), else a new
  `partition-assets backfill adopt <id>`. In the webserver, a new standby then starts.
- `keep_standby(home, modules)` starts that standby (`partition-assets backfill standby`) in
  the webserver process, unless it has one alive: the standby imports Dagster, the engine
  and the code locations and starts its workers' fork server and workers while nothing
  is asked of it, so a launch starts at once.
- `await_backfill(home)`, the standby's side: says `standby <pid> ready`, reads one backfill
  id on stdin and from then on writes to that backfill's log (`coordinator_log`); None
  when stdin closes without one (its webserver is gone: the standby exits).
- Every coordinator process is detached (its own session, output appended to
  `coordinator_log`): a backfill outlives a webserver restart, like a daemon's.

Not guaranteed: which process is the webserver is read from its main module
(`python -m dagster_webserver`, as `dagster dev` starts it, or the `dagster-webserver`
script); partition_assets_tests/e2e/test_dagster_ui_webserver.py's standby test pins it with the installed
Dagster. A coordinator process killed once it was handed a backfill leaves that backfill
in progress: `partition-assets backfill resume <id>` finishes it (`adopt <id>` when it was
killed before it recorded the backfill). Imports only the standard library, ids.py and
errors.py: every process of the instance (webserver, daemon, run workers) loads it.
"""

import os
import subprocess
import sys
from pathlib import Path

from partition_assets.ids import checked_backfill_id
from partition_assets.processes.detached import start_detached

# The standby coordinator of this (webserver) process, per (DAGSTER_HOME, engine modules).
_standbys: dict[tuple[str, tuple[str, ...]], subprocess.Popen] = {}
# The log a standby writes to until it is handed a backfill.
_STANDBY_LOG = "standby"


def in_webserver() -> bool:
    """Whether this process is Dagster's webserver."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    return (spec is not None and spec.name.startswith("dagster_webserver")) or Path(sys.argv[0]).name == (
        "dagster-webserver"
    )


def coordinator_log(home: str, log_name: str) -> Path:
    """Where the detached coordinator of a UI-launched backfill (named by its id) or the
    standby writes its output."""
    return Path(home) / "partition_assets" / "backfills" / f"{checked_backfill_id(log_name)}.log"


def start_coordinator(home: str, modules: list[str], backfill_id: str) -> None:
    """Has a coordinator process run the Dagster backfill `backfill_id` on the engine."""
    if not _hand_to_standby(home, modules, backfill_id):
        _coordinator_process(home, ["adopt", backfill_id], backfill_id, stdin=subprocess.DEVNULL)
    keep_standby(home, modules)


def keep_standby(home: str, modules: list[str]) -> None:
    """Starts the webserver's standby coordinator for `modules`, unless one is alive; does
    nothing outside the webserver (where no launch comes from)."""
    if not in_webserver():
        return
    key = (home, tuple(modules))
    if key not in _standbys or _standbys[key].poll() is not None:
        # It reads one backfill id on stdin; it exits when stdin closes (this process is gone).
        _standbys[key] = _coordinator_process(home, ["standby"], _STANDBY_LOG, stdin=subprocess.PIPE)


def await_backfill(home: str) -> str | None:
    """In the standby: the backfill id its webserver hands it on stdin, once this process's
    output goes to that backfill's log; None when stdin closes without one."""
    print(f"standby {os.getpid()} ready", flush=True)
    backfill_id = sys.stdin.readline().strip()
    if not backfill_id:
        return None
    checked_backfill_id(backfill_id, "the Dagster backfill id on stdin")
    with coordinator_log(home, backfill_id).open("ab") as log:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
            os.dup2(log.fileno(), stream.fileno())
    print(f"standby {os.getpid()} adopts backfill {backfill_id}", flush=True)
    return backfill_id


def _hand_to_standby(home: str, modules: list[str], backfill_id: str) -> bool:
    """Gives `backfill_id` to this process's standby coordinator, if one is alive."""
    standby = _standbys.pop((home, tuple(modules)), None)
    if standby is None or standby.poll() is not None or standby.stdin is None:
        return False
    try:
        standby.stdin.write(f"{backfill_id}\n".encode())
        standby.stdin.close()
    except OSError:  # it died meanwhile: a new coordinator takes the backfill
        return False
    return True


def _coordinator_process(home: str, arguments: list[str], log_name: str, stdin: int) -> subprocess.Popen:
    # Detached (own session): the backfill outlives a webserver restart, like a daemon's.
    log = coordinator_log(home, log_name)
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as output:
        return start_detached(
            [sys.executable, "-m", "partition_assets", "backfill", *arguments],
            env={**os.environ, "DAGSTER_HOME": home},
            stdin=stdin,
            stdout=output,
        )
