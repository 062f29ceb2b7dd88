"""partition_assets as a library (issue 43 point 6): a wheel built from this checkout, installed
(not editable) into a fresh venv, plans and runs a backfill of a user's project in a folder of
its own, wired by `partition_assets.definitions`. uv builds and installs from its cache when
that holds every release (offline, ~2 s, each package linked rather than copied), else from the
index, as `make install` does."""

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg

from partition_assets_tests.support import REPO
from partition_assets_tests.support.checkout import UV, source_copy, uv

# The project's assets are code_location_forms' own (Dagster's default partitions and IO manager).
ASSETS = REPO / "partition_assets_tests" / "support" / "locations" / "code_location_forms" / "visits.py"
USER_DEFINITIONS = """\
import dagster as dg

import partition_assets
from my_project.visits import doubled_visits, visits

# Dagster's own filesystem IO manager (under DAGSTER_HOME/storage), in place of the Delta one.
defs = partition_assets.definitions(assets=[visits, doubled_visits], module=__name__, io_manager=dg.fs_io_manager)
"""
PYPROJECT = '[tool.dg]\ndirectory_type = "project"\n\n[tool.dg.project]\nroot_module = "my_project"\n'


def installed_wheel(root: Path) -> Path:
    """A fresh venv under `root` holding the wheel of this checkout's package; its python."""
    source = source_copy(root / "source")
    uv("build", "--wheel", "-q", "-o", str(root / "dist"), str(source))
    python = root / "venv" / "bin" / "python"
    subprocess.run([UV, "venv", "-q", "--python", sys.executable, str(root / "venv")], check=True)
    (wheel,) = (root / "dist").glob("partition_assets-*.whl")
    uv(
        "pip",
        "install",
        "-q",
        "--link-mode",
        "symlink",
        "--python",
        str(python),
        "-c",
        str(REPO / "constraints.txt"),
        str(wheel),
    )
    return python


def test_a_wheel_in_a_fresh_venv_plans_and_runs_a_users_project(home, tmp_path):
    python = installed_wheel(tmp_path / "wheel")
    project = tmp_path / "my_project"
    (project / "my_project").mkdir(parents=True)
    (project / "pyproject.toml").write_text(PYPROJECT)
    (project / "my_project" / "__init__.py").write_text("")
    (project / "my_project" / "visits.py").write_text(ASSETS.read_text())
    (project / "my_project" / "definitions.py").write_text(USER_DEFINITIONS)
    # No PYTHONPATH (this checkout would be on it); bytecode written, as `make test` lets every
    # process write it: the venv's first process compiles what it imports, the others read it.
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE")}

    def cli(*args: str, console_script: bool = False) -> subprocess.CompletedProcess:
        # From the project's folder, which `python -m` and the console script put on the import
        # path (the plan names the uninstalled module; the run reads it from pyproject.toml, as
        # `dg dev` does).
        module = [str(python), "-m", "partition_assets"]
        program = [str(python.parent / "partition-assets")] if console_script else module
        return subprocess.run([*program, *args], cwd=project, env=env, capture_output=True, text=True, timeout=300)

    # The package the venv imports: its own copy, not this checkout.
    found = subprocess.run(
        [str(python), "-c", "import partition_assets; print(partition_assets.__file__)"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert found.startswith(str(tmp_path / "wheel" / "venv")), found

    days = ["--select", "key:visits+", "--start", "2024-01-02", "--end", "2024-01-03"]
    planned = cli("backfill", "plan", "-m", "my_project.definitions", *days, console_script=True)
    assert planned.returncode == 0 and "4 nodes" in planned.stdout, planned.stdout + planned.stderr
    ran = cli("backfill", "run", *days)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    # Dagster's DEBUG event lines stay in the runs' logs: the node runs' and the publish run's.
    assert "DEBUG" not in ran.stdout + ran.stderr, ran.stdout + ran.stderr
    with dg.DagsterInstance.get() as instance:
        materialized = {
            key: instance.get_materialized_partitions(dg.AssetKey(key)) for key in ("visits", "doubled_visits")
        }
    assert materialized == {"visits": {"2024-01-02", "2024-01-03"}, "doubled_visits": {"2024-01-02", "2024-01-03"}}
