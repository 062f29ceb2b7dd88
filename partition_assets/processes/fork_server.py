"""The fork server backfill workers are forked from (multiprocessing's forkserver,
backfill/running/local_workers.py), startable before anything heavy is imported.

Importing Dagster and a code location takes ~1.2 s on 2 cores. A fork server started by
`partition-assets backfill run` as its first step (`start_for_command`) does that while
the command's own process imports the same for its planning: its first worker is ready
~1 s sooner than with a fork server started after planning.

Not guaranteed: only `-m/--module-name` on the command line names the code location
early; a `-f` file or `[tool.dagster] module_name` is loaded by each worker instead (a
file never is preloaded: it is not importable by name).
"""

import argparse
import multiprocessing
import multiprocessing.forkserver
from collections.abc import Sequence

RUNNER_MODULE = "partition_assets.backfill.running.local_workers"


def preload_of(targets: Sequence[str]) -> list[str]:
    """What the fork server imports: the runner module, and the code locations given as modules."""
    return [RUNNER_MODULE, *(target for target in targets if not target.endswith(".py"))]


def start(targets: Sequence[str]) -> None:
    """Starts this process's fork server now (if it is not running), importing the runner
    and the code locations `targets` in the background."""
    multiprocessing.set_forkserver_preload(preload_of(targets))
    multiprocessing.forkserver.ensure_running()


def running_pid() -> int:
    """The pid of this process's fork server, started now (with the preload last set) if
    it is not running. Reads multiprocessing's private `forkserver._forkserver`, as
    processes/quick_exit.py does."""
    multiprocessing.forkserver.ensure_running()
    return multiprocessing.forkserver._forkserver._forkserver_pid  # type: ignore[attr-defined]


def start_for_command(argv: Sequence[str]) -> None:
    """Starts the fork server when `argv` (the command line's arguments) runs a backfill on
    local workers: `backfill run`, not `--runs-via launcher`; with the code location of
    `-m/--module-name`, when given."""
    if list(argv[:2]) != ["backfill", "run"]:
        return
    early = argparse.ArgumentParser(add_help=False)
    early.add_argument("-m", "--module-name")
    early.add_argument("--runs-via")
    known, _ = early.parse_known_args(argv[2:])
    if known.runs_via == "launcher":
        return
    start([known.module_name] if known.module_name else [])
