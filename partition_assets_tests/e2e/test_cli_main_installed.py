"""Bad inputs through the installed command (a fresh interpreter) and a deploy whose code
does not load: exit code 2, one line, no traceback, nothing left behind (every subcommand's
bad inputs through `main()`: partition_assets_tests/integration/test_cli_main.py)."""

import os
import subprocess

import pytest

from partition_assets_tests.integration.test_cli_main import (
    ENGINE,
    JANUARY,
    KNOWN_ID,
    files_under,
    run_in_process,
    with_a_recorded_backfill,
)
from partition_assets_tests.support import REPO
from partition_assets_tests.support.cli_runs import CLI, run_cli


@pytest.fixture
def home(home, monkeypatch):
    return with_a_recorded_backfill(home, monkeypatch)


def test_bad_inputs_through_the_installed_command_print_no_traceback(home):
    """The real entry point (a fresh interpreter), not only `main()` in this process."""
    for argv, names in [
        (["backfill", "run", *ENGINE, "--select", "", *JANUARY], "the selection is empty"),
        (["backfill", "status", "no_such_id"], f"known: {KNOWN_ID}"),
        (["vacuum", "/no/such/table"], "/no/such/table"),
    ]:
        done = run_cli(*argv, env={**os.environ, "DAGSTER_HOME": str(home)})
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr and names in done.stderr.splitlines()[-1], done.stderr


def test_a_module_that_raises_on_import_shows_its_own_frames_then_one_line(home, tmp_path):
    """The user's traceback, cut to their files (no frame of Python's, Dagster's or
    partition_assets'), then one line naming the module, the exception and the fix; exit 2."""
    project = tmp_path / "project"
    (project / "my_project").mkdir(parents=True)
    (project / "my_project/__init__.py").write_text("")
    (project / "my_project/definitions.py").write_text("import dagster as dg\nfrom my_project import helpers\n")
    (project / "my_project/helpers.py").write_text("def rates():\n    return 1 / 0\n\n\nRATES = rates()\n")
    before = files_under(home)
    done = subprocess.run(
        [*CLI, "backfill", "plan", "-m", "my_project.definitions", "--select", "key:raw", *JANUARY],
        cwd=project,
        env={**os.environ, "DAGSTER_HOME": str(home)},
        capture_output=True,
        text=True,
    )
    lines = done.stderr.splitlines()
    assert done.returncode == 2, done.stderr
    assert lines[-1] == (
        "partition-assets backfill: my_project.definitions raised ZeroDivisionError while it was imported "
        "(division by zero): fix its code, whose traceback is above; nothing was written"
    )
    frames = [line.strip() for line in lines if line.strip().startswith("File ")]
    assert frames == [
        f'File "{project}/my_project/definitions.py", line 2, in <module>',
        f'File "{project}/my_project/helpers.py", line 5, in <module>',
        f'File "{project}/my_project/helpers.py", line 2, in rates',
    ], done.stderr
    assert "ZeroDivisionError: division by zero" in lines
    assert files_under(home) == before


@pytest.mark.slow
def test_a_deploy_whose_code_does_not_load_leaves_no_worktree_and_no_workspace_entry(home, capsys):
    worktrees = subprocess.run(["git", "worktree", "list"], cwd=REPO, capture_output=True, text=True).stdout
    workspace = (REPO / "workspace.yaml").read_text()
    logs = set((REPO / ".deploys").glob("*.log"))

    code, stderr = run_in_process(["deploy", "HEAD", "-m", "no_such_module_anywhere"], capsys)
    for log in set((REPO / ".deploys").glob("*.log")) - logs:  # the server's log, which the message names
        log.unlink()

    assert code == 2 and "Traceback" not in stderr, stderr
    assert len(stderr.strip().splitlines()) == 1 and "no_such_module_anywhere" in stderr, stderr
    assert subprocess.run(["git", "worktree", "list"], cwd=REPO, capture_output=True, text=True).stdout == worktrees
    assert (REPO / "workspace.yaml").read_text() == workspace
    assert "no_such_module_anywhere" not in run_cli("deploys").stdout
