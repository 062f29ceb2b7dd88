"""`python -m partition_assets` and the `partition-assets` command."""

import gc
import os
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
    # The working folder on the import path, as `python -m partition_assets` and Dagster's own
    # commands put it: `-m my_project.definitions` run from the project's folder finds it
    # uninstalled (a console script's path starts with the venv's bin folder instead). Not
    # under -P (PYTHONSAFEPATH): a deployed commit's processes run so, their folder being the
    # repository at another commit (deploy/deployments.py).
    if not sys.flags.safe_path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    gc.disable()
    try:
        from partition_assets.cli.main import loaded
        from partition_assets.processes.quick_exit import exit_now

        command = loaded()  # the command's modules, loaded with the collector off (`--help` exits here)
    finally:
        gc.freeze()
        gc.enable()
    exit_now(command())


if __name__ == "__main__":
    console()
