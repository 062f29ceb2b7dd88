"""`partition-assets backfill`'s own logic (cli/backfill.py), without an instance: every action
the parser accepts has its handler (one it lacks would fall through to `adopt`), the code
location a command names (-m, -f, -w, else pyproject.toml), DAGSTER_HOME refused before
anything is written, the exit code of how a run ended, and the console a run reports to.
The commands on a real instance: partition_assets_tests/integration/test_cli_backfill_commands.py.
"""

import argparse
import io

import pytest

from partition_assets.backfill.commands.console import PrintingConsole
from partition_assets.backfill.commands.results import Committed, Published, RunOutcome
from partition_assets.cli import backfill
from partition_assets.cli.live import LiveConsole
from partition_assets.cli.main import build_parser
from partition_assets.errors import EnvironmentSetupError

# The actions run_backfill_command handles in its own branches; every other one is a command
# on a recorded backfill (cli/backfill.py _ON_RECORD), and what is left falls through to adopt.
OWN_BRANCHES = {"plan", "run", "retract", "list", "standby", "serve", "adopt"}


def backfill_actions() -> set[str]:
    """The actions `partition-assets backfill` parses."""
    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    actions = next(a for a in commands.choices["backfill"]._actions if isinstance(a, argparse._SubParsersAction))
    return set(actions.choices)


def target_args(module_name=None, python_file=None, workspace=None) -> argparse.Namespace:
    return argparse.Namespace(module_name=module_name, python_file=python_file, workspace=workspace)


def test_every_action_the_parser_accepts_has_a_handler_and_none_falls_through_to_adopt():
    assert backfill_actions() - OWN_BRANCHES == set(backfill._ON_RECORD)
    assert OWN_BRANCHES <= backfill_actions()


def test_the_code_location_is_the_module_the_file_or_the_workspace_entry(tmp_path, monkeypatch):
    assert backfill._target(target_args(module_name="my_project.defs")) == "my_project.defs"
    monkeypatch.chdir(tmp_path)
    assert backfill._target(target_args(python_file="defs.py")) == str(tmp_path / "defs.py")
    (tmp_path / "workspace.yaml").write_text("load_from:\n  - python_module: my_project.definitions\n")
    assert backfill._target(target_args(workspace="workspace.yaml")) == "my_project.definitions"


def test_without_an_option_the_code_location_is_the_one_pyproject_names(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text('[tool.dagster]\nmodule_name = "my_project.definitions"\n')
    monkeypatch.chdir(tmp_path)
    assert backfill._target(target_args()) == "my_project.definitions"


def test_dagster_home_unset_or_not_a_folder_is_refused_naming_the_fix(tmp_path, monkeypatch):
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    with pytest.raises(EnvironmentSetupError, match="DAGSTER_HOME is not set: .* export it.*nothing was written"):
        backfill.dagster_home()
    missing = tmp_path / "missing"
    monkeypatch.setenv("DAGSTER_HOME", str(missing))
    with pytest.raises(EnvironmentSetupError, match=f"DAGSTER_HOME {missing} is not a folder: create it"):
        backfill.dagster_home()
    assert not missing.exists()
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    assert backfill.dagster_home() == str(tmp_path)


@pytest.mark.parametrize(
    ("result", "code"),
    [
        (RunOutcome("bf", "backfill bf: 2 succeeded", succeeded=True), 0),
        (RunOutcome("bf", "backfill bf: 1 failed, 1 succeeded", succeeded=False), 1),
        (Published("bf", Committed.PUBLISHED, {}), 0),
    ],
    ids=["succeeded", "failed", "published"],
)
def test_a_run_ends_with_its_message_and_exits_1_only_when_its_nodes_failed(result, code, capsys):
    assert backfill._ended(result) == code
    assert capsys.readouterr().out == result.message + "\n"


class Terminal(io.StringIO):
    """stdout as a terminal."""

    def isatty(self) -> bool:
        return True


def test_a_run_reports_to_a_live_line_on_a_terminal_and_line_by_line_when_piped(monkeypatch):
    monkeypatch.setattr("sys.stdout", io.StringIO())
    with backfill._terminal_console() as console:
        assert isinstance(console, PrintingConsole)
    terminal = Terminal()
    monkeypatch.setattr("sys.stdout", terminal)
    with backfill._terminal_console() as console:
        assert isinstance(console, LiveConsole)
        console.line("gate: 1 of 1 checks passed")
    assert "gate: 1 of 1 checks passed" in terminal.getvalue()
