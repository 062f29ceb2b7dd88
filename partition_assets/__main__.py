"""`python -m partition_assets` and the `partition-assets` command."""

import gc
import sys


def console() -> None:
    """The command line: the instance's command server runs the command when it runs one
    (processes/command_client.py), else `main`, then ends the process without tearing
    down its modules.

    The cyclic collector is off while the command's modules load (Dagster's are ~200,000
    objects: its full collections cost ~15% of the import), then what they loaded is
    frozen, out of its sight for the process's life: a command that runs a backfill for
    hours no longer walks Dagster's modules on each full collection.
    """
    from partition_assets.processes.command_client import run_on_server

    code = run_on_server(sys.argv[1:])
    if code is not None:
        sys.exit(code)
    gc.disable()
    try:
        from partition_assets.cli import main  # loaded with the collector off
        from partition_assets.processes.quick_exit import exit_now
    finally:
        gc.freeze()
        gc.enable()
    exit_now(main())


if __name__ == "__main__":
    console()
