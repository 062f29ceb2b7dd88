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
    working_folder_last()  # first: the command server compares the import path it is sent
    from partition_assets.processes.command_client import run_on_server

    code = run_on_server(sys.argv[1:])
    if code is not None:
        sys.exit(code)
    gc.disable()
    try:
        from partition_assets.cli.main import loaded
        from partition_assets.processes.quick_exit import exit_now

        command = loaded()  # the command's modules, loaded with the collector off (`--help` exits here)
    finally:
        gc.freeze()
        gc.enable()
    exit_now(command())


def working_folder_last() -> None:
    """Puts the working folder on the import path after the standard library and the installed
    packages: `-m my_project.definitions` run from the project's folder finds it uninstalled,
    and a module of that folder named as one of theirs (a `yaml.py`) is never imported in its
    place. Dagster's commands likewise load their own modules before the folder is on the
    path (they add it while importing the code location). `python -m partition_assets` put it
    first; a console script's path starts with the venv's bin folder instead.

    Not under -P (PYTHONSAFEPATH): a deployed commit's processes run so, their folder being
    the repository at another commit (deploy/deployments.py).
    Not guaranteed: a module of the folder that an installed package also provides (a
    `utils.py` beside an installed `utils`) is the installed one here, where Dagster's code
    location import would take the folder's: name it apart, or install the project.
    """
    if sys.flags.safe_path:
        return
    folder = os.getcwd()
    sys.path[:] = [path for path in sys.path if path != folder] + [folder]


if __name__ == "__main__":
    console()
