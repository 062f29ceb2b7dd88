"""`partition-assets backfill` and its commands: plan, run, status, list, resume, retry, cancel, pause,
unpause, extend, diff, publish, approve, discard, ledger, rollback, retract.

This module parses the command line, calls the command's function (backfill/commands/) and
renders its result (cli/rendering.py, cli/heatmap.py); the commands themselves, and every
refusal, live there, shared with the Launchpad's jobs (automation/operations.py)."""

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg

from partition_assets.backfill.commands import (
    RunOutcome,
    adopt_backfill,
    approve_backfill,
    backfill_ledger,
    backfill_status,
    cancel_backfill,
    detach_backfill,
    diff_backfill,
    discard_backfill,
    extend_backfill,
    list_backfills,
    pause_backfill,
    plan_backfill,
    publish_backfill,
    resume_backfill,
    retract_partitions,
    retry_backfill,
    rollback_backfill,
    run_backfill,
    stand_by,
    unpause_backfill,
)
from partition_assets.backfill.commands.console import Console, PrintingConsole
from partition_assets.backfill.commands.results import Published
from partition_assets.backfill.planning.spec import spec_from_arguments
from partition_assets.cli.heatmap import Heatmap
from partition_assets.cli.live import LiveConsole
from partition_assets.cli.rendering import plan_json, render_diff, render_ledger, render_lineup, render_plan
from partition_assets.code_location import configured_module, workspace_target
from partition_assets.dagster_instance.migrations import remember_dagster_migrations
from partition_assets.dagster_instance.storage import same_files_lighter
from partition_assets.deploy.code_root import exec_in_code_root
from partition_assets.errors import BackfillPlanError, EnvironmentSetupError
from partition_assets.ids import checked_backfill_id
from partition_assets.processes.command_server import serve
from partition_assets.run_console import VERBOSE_ENV


def run_backfill_command(args: argparse.Namespace, argv: list[str]) -> int:
    """Runs `backfill <action>` (the command line `argv`) in the instance of DAGSTER_HOME and prints
    its result; on a deploy's code root, in a new interpreter, when asked for; a bad input raises a
    PartitionAssetsError before anything is recorded."""
    exec_in_code_root(args, argv)  # when asked for
    if args.action == "serve":
        from partition_assets.cli.main import main, served_refusal  # cli.main imports this module when it runs

        return serve(dagster_home(), main, served_refusal)
    if getattr(args, "verbose", False):  # read by whatever runs the nodes: workers copy this environment
        os.environ[VERBOSE_ENV] = "1"
    if args.action in ("plan", "run"):
        spec = spec_from_arguments(args, _target(args))
        with _instance() as instance:
            if args.action == "plan":
                planned = plan_backfill(spec, instance)
                print(json.dumps(plan_json(planned), indent=2) if args.json else render_plan(planned))
                return 0
            if args.detach:  # the engine job records and runs it where runs run
                print(detach_backfill(spec, instance).message)
                return 0
            return _on_terminal(lambda console: run_backfill(spec, instance, console, launched_by=args.by))
    if args.action == "retract":
        spec = spec_from_arguments(args, _target(args))
        with _instance() as instance:
            retracted = retract_partitions(spec, instance, launched_by=args.by)
        for line in (*retracted.lines, retracted.message):
            print(line)
        return 0
    if args.action in _ON_RECORD:
        backfill_id = checked_backfill_id(args.backfill_id, "the backfill id argument")
        with _instance() as instance:
            return _ON_RECORD[args.action](instance, backfill_id, args)
    with _instance() as instance:
        if args.action == "list":
            lineup = list_backfills(instance)
            if lineup.standings:
                print(render_lineup(lineup))
            return 0
        if args.action == "standby":
            outcome = stand_by(instance, TerminalConsole())
            return 0 if outcome is None else _ended(outcome)
        return _ended(adopt_backfill(instance, args.backfill_id, TerminalConsole()))


# The console of a command whose output is piped: each line printed as it comes.
TerminalConsole = PrintingConsole


@contextmanager
def _terminal_console() -> Iterator[Console]:
    """A live progress line when stdout is a terminal (cli/live.py), else a line per node."""
    if not sys.stdout.isatty():
        yield TerminalConsole()
        return
    live = LiveConsole(sys.stdout)
    try:
        yield live
    finally:
        live.close()


def _on_terminal(command: Callable[[Console], RunOutcome | Published]) -> int:
    """Runs `command` with the terminal's console, then prints how it ended."""
    with _terminal_console() as console:
        outcome = command(console)
    return _ended(outcome)


def _instance() -> dg.DagsterInstance:
    """The Dagster instance of DAGSTER_HOME, where backfills are recorded. This process (and
    the workers it forks) reads Dagster's migration scripts once (dagster_instance/migrations.py), not
    per database it opens, and writes Dagster's default storage through its lighter twins
    that write the same files (dagster_instance/storage.py `same_files_lighter`).

    Raises:
        EnvironmentSetupError: DAGSTER_HOME is not set, or names no folder.
    """
    dagster_home()
    remember_dagster_migrations()
    instance = dg.DagsterInstance.get()
    lighter = same_files_lighter(instance.get_ref())
    if lighter == instance.get_ref():
        return instance
    instance.dispose()
    return dg.DagsterInstance.from_ref(lighter)


def dagster_home() -> str:
    """DAGSTER_HOME, the folder of the instance where backfills are recorded.

    Raises:
        EnvironmentSetupError: DAGSTER_HOME is not set, or names no folder; nothing was written.
    """
    home = os.environ.get("DAGSTER_HOME")
    if not home:
        raise EnvironmentSetupError(
            "DAGSTER_HOME is not set: backfills are recorded in a Dagster instance, the folder Dagster's "
            "own commands read it from; create one and export it, e.g. `mkdir -p .dagster_home && export "
            "DAGSTER_HOME=$PWD/.dagster_home`, in every shell that runs dagster or partition-assets; "
            "nothing was written"
        )
    if not Path(home).is_dir():
        raise EnvironmentSetupError(
            f"DAGSTER_HOME {home} is not a folder: create it (`mkdir -p {home}`) or export DAGSTER_HOME as "
            "the folder of your Dagster instance; nothing was written"
        )
    return home


def _ended(result: RunOutcome | Published) -> int:
    """Prints how the command ended; 1 when its nodes failed or it stopped short of publishing."""
    print(result.message)
    return 0 if not isinstance(result, RunOutcome) or result.succeeded else 1


def _status(instance: dg.DagsterInstance, backfill_id: str, args: argparse.Namespace) -> int:
    report = backfill_status(instance, backfill_id)
    for path in (args.html, args.png):
        if path and not Path(path).resolve().parent.is_dir():
            raise BackfillPlanError(f"cannot write {path}: its folder does not exist; create it or pick another path")
    heatmap = Heatmap(report.graph, report.node_states, report.title, report.current)
    print(heatmap.text())
    notes = (report.fewer_runs, report.launch, report.silence)
    for line in (
        *report.retracted_lines,
        *report.failed_lines,
        *report.blocked_lines,
        *report.skipped_lines,
        *notes,
        *(report.previous_versions or ()),
    ):
        if line is not None:
            print(line)
    if args.verbose:
        print("\n".join(report.stage_lines))
    if report.unpublished is not None:  # last: a failed staged backfill published nothing, and the fix
        print(report.unpublished)
    if args.html:
        Path(args.html).write_text(heatmap.html())
    if args.png:
        heatmap.png(args.png)
    return 0


def _ledger(instance: dg.DagsterInstance, backfill_id: str, args: argparse.Namespace) -> int:
    report = backfill_ledger(instance, backfill_id)
    if args.json:
        print(json.dumps([entry.to_json() for entry in report.entries], indent=2, default=str))
    else:
        print(render_ledger(report))
    return 0


# Each command on a recorded backfill: its function, called with the parsed arguments, printed.
_ON_RECORD: dict[str, Callable[[dg.DagsterInstance, str, argparse.Namespace], int]] = {
    "status": _status,
    "ledger": _ledger,
    "diff": lambda instance, backfill_id, args: _shown(render_diff(diff_backfill(instance, backfill_id))),
    "resume": lambda instance, backfill_id, args: _on_terminal(
        lambda console: resume_backfill(instance, backfill_id, console)
    ),
    "retry": lambda instance, backfill_id, args: _on_terminal(
        lambda console: retry_backfill(instance, backfill_id, console)
    ),
    "cancel": lambda instance, backfill_id, args: _shown(cancel_backfill(instance, backfill_id).message),
    "pause": lambda instance, backfill_id, args: _shown(pause_backfill(instance, backfill_id).message),
    "unpause": lambda instance, backfill_id, args: _shown(unpause_backfill(instance, backfill_id).message),
    "extend": lambda instance, backfill_id, args: _shown(
        extend_backfill(instance, backfill_id, args.start, args.end).message
    ),
    "publish": lambda instance, backfill_id, args: _shown(publish_backfill(instance, backfill_id, args.force).message),
    "approve": lambda instance, backfill_id, args: _shown(
        approve_backfill(instance, backfill_id, args.by, args.force).message
    ),
    "discard": lambda instance, backfill_id, args: _shown(discard_backfill(instance, backfill_id).message),
    "rollback": lambda instance, backfill_id, args: _shown(
        rollback_backfill(instance, backfill_id, args.force, requested_by=args.by).message
    ),
}


def _shown(text: str) -> int:
    print(text)
    return 0


def _target(args: argparse.Namespace) -> str:
    if args.module_name or args.python_file:
        return args.module_name or str(Path(args.python_file).resolve())
    if args.workspace:
        return workspace_target(Path(args.workspace))
    return configured_module()
