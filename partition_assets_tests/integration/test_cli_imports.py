"""What the command line imports before it knows its command: nothing that only some commands
use. Every `partition-assets` command pays its imports, a `backfill run` before its first node."""

import subprocess
import sys

import pytest

from partition_assets_tests.support import REPO
from partition_assets_tests.support.cli_runs import CLI, CONSOLE_SCRIPT

VISITS = REPO / "partition_assets_tests" / "support" / "locations" / "code_location_forms" / "visits.py"


def test_the_command_line_loads_without_grpc_or_pillow():
    """gRPC (the code-server client of a deploy, partition_assets/dagster_internals.py) and Pillow
    (a heatmap's PNG, cli/heatmap.py) load when they are used: ~70 ms of every start-up."""
    code = "import sys, partition_assets.cli.main; print(sorted(m for m in ('grpc', 'PIL') if m in sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"


def test_the_command_server_client_loads_without_dagster():
    """Every command loads the command server's client before anything else
    (partition_assets/__main__.py): a served command's process imports the standard library
    and the client only, ~0.05 s against ~1 s for Dagster."""
    code = (
        "import sys, partition_assets.__main__, partition_assets.processes.command_client; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('dagster', 'pyspark', 'pyarrow', 'numpy')))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"


# A project folder holding a module named as an installed package, beside its code location.
STRAY_YAML = 'raise RuntimeError("the working folder\'s yaml.py was imported")\n'


@pytest.mark.parametrize("console_script", [True, False], ids=["partition-assets", "python -m partition_assets"])
def test_the_working_folder_resolves_the_project_but_shadows_no_installed_package(home, tmp_path, console_script):
    """The working folder is on the import path after the installed packages (__main__.py):
    the project's `-m shop.definitions` resolves from it, uninstalled, and its `yaml.py` is
    not imported in place of PyYAML (it was: the folder went first, before any import)."""
    project = tmp_path / "project"
    (project / "shop").mkdir(parents=True)
    (project / "shop" / "__init__.py").write_text("")
    (project / "shop" / "definitions.py").write_text(
        VISITS.read_text() + "\ndefs = dg.Definitions(assets=[visits, doubled_visits])\n"
    )
    (project / "yaml.py").write_text(STRAY_YAML)
    program = CONSOLE_SCRIPT if console_script else CLI
    days = ["--select", "key:visits", "--start", "2024-01-02", "--end", "2024-01-03"]
    planned = subprocess.run(
        [*program, "backfill", "plan", "-m", "shop.definitions", *days],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "yaml.py was imported" not in planned.stderr
    assert planned.returncode == 0 and "2 nodes" in planned.stdout, planned.stdout + planned.stderr


# Prints which of Dagster, Spark and Delta the command line imported to answer argv (sys.argv[1:]).
_HEAVY_AFTER_COMMAND = """
import sys
from partition_assets.cli.main import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print(sorted(m for m in sys.modules if m.split('.')[0] in ('dagster', 'pyspark', 'deltalake')))
"""


def test_help_loads_no_dagster_spark_or_delta():
    """`--help` of the command line, of `backfill` and of `backfill run` answers from the parser
    alone (cli/main.py): Dagster's import alone is ~1 CPU-s (bench/results/cli_start.md)."""
    for argv in (["--help"], ["backfill", "--help"], ["backfill", "run", "--help"], ["release", "--help"]):
        done = subprocess.run(
            [sys.executable, "-c", _HEAVY_AFTER_COMMAND, *argv], capture_output=True, text=True, check=True
        )
        assert "usage: partition-assets" in done.stdout, argv
        assert done.stdout.strip().splitlines()[-1] == "[]", (argv, done.stdout.strip().splitlines()[-1][:200])


def test_release_list_reads_the_release_log_without_dagster_or_spark(tmp_path):
    """`release list` reads one Delta table (the release log) with delta-rs: Dagster and Spark's
    Python package, ~0.4 CPU-s of its start, came with the storage modules it read it through."""
    argv = ["release", "list", "--lake", str(tmp_path)]
    done = subprocess.run(
        [sys.executable, "-c", _HEAVY_AFTER_COMMAND, *argv], capture_output=True, text=True, check=True
    )
    assert done.stdout.splitlines()[0] == f"no release in {tmp_path} yet"
    loaded = done.stdout.strip().splitlines()[-1]
    assert "'dagster" not in loaded and "'pyspark" not in loaded, loaded[:300]
