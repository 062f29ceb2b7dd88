"""A command server (processes/command_server.py `serve`) whose one command reports the
process it runs in, for tests of the server and its clients without Dagster's start-up:
`python -m partition_assets_tests.support.probe_server` serves DAGSTER_HOME's instance
until SIGTERM, and `partition-assets backfill probe FILE` (started as `cli_runs` starts
commands, so the server takes it) writes FILE and prints `nice N` and `nofile SOFT`.

Not guaranteed: that `probe` is a command of `partition-assets` (it is not: a client the
server did not take runs `partition-assets backfill probe` itself, and fails on usage).
"""

import os
import resource
import sys

from partition_assets.__main__ import working_folder_last
from partition_assets.processes.command_server import serve


def probe(argv: list[str]) -> int:
    """`backfill probe FILE`: writes FILE with the process's umask and prints its settings."""
    _, _, path = argv
    with open(path, "w") as written:
        written.write("probe\n")
    print(f"nice {os.getpriority(os.PRIO_PROCESS, 0)}")
    print(f"nofile {resource.getrlimit(resource.RLIMIT_NOFILE)[0]}")
    return 0


def runs_everything(argv: list[str]) -> None:
    """The server's refusal: none."""
    return None


if __name__ == "__main__":
    working_folder_last()  # the import path `partition-assets` clients send
    sys.exit(serve(os.environ["DAGSTER_HOME"], probe, runs_everything))
