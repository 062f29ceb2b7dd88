"""`python -m partition_assets` and the `partition-assets` command."""

import sys

from partition_assets.processes import fork_server
from partition_assets.processes.quick_exit import exit_now


def console() -> None:
    """The command line: a backfill's fork server first (it imports what its workers need
    while this process imports the CLI), then `main`, then ends the process without
    tearing down its modules."""
    fork_server.start_for_command(sys.argv[1:])
    from partition_assets.cli import main  # Dagster: after the fork server started

    exit_now(main())


if __name__ == "__main__":
    console()
