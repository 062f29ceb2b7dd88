"""`python -m partition_assets` and the `partition-assets` command."""

from partition_assets.cli import main
from partition_assets.processes.quick_exit import exit_now


def console() -> None:
    """The command line: `main`, then ends the process without tearing down its modules."""
    exit_now(main())


if __name__ == "__main__":
    console()
