"""What a backfill prints, worded with fakes: a failed node's error as the user's code raised
it, the last line grouping failures by cause, and the live progress line of a terminal."""

import io
import os
from datetime import UTC, datetime

import dagster as dg
import pytest

from partition_assets.backfill.commands import Committed, Published
from partition_assets.backfill.model import Node, NodeResult, NodeStatus, RunUnit
from partition_assets.backfill.planning.graph import build_graph
from partition_assets.backfill.planning.spec import TimeRange
from partition_assets.backfill.publishing.publish_step import describe_versions
from partition_assets.backfill.running.local_workers import user_error_line
from partition_assets.backfill.running.progress import Progress, Tally
from partition_assets.cli.live import LiveConsole, progress_line
from partition_assets.cli.main import main
from partition_assets.dagster_internals import SerializableErrorInfo
from partition_assets.partitions import daily
from partition_assets.run_console import VERBOSE_ENV, quiet_console_config

DAYS = daily("2024-01-01")
SCHEMA_ERROR = "SourceSchemaError: column amount became a string"


@dg.asset(partitions_def=DAYS)
def orders() -> None: ...


@dg.asset(partitions_def=DAYS, deps=[orders])
def revenue() -> None: ...


def day(n: int) -> str:
    return f"2024-01-{n:02d}"


def progress_over_four_days(clock=lambda: 0.0, staged=False) -> Progress:
    graph = build_graph(
        dg.Definitions(assets=[orders, revenue]).resolve_asset_graph(),
        [orders.key, revenue.key],
        TimeRange(datetime(2024, 1, 1, tzinfo=UTC), datetime(2024, 1, 5, tzinfo=UTC)),
    )
    return Progress("b1", graph, done=(), clock=clock, staged=staged)


def failed(asset: dg.AssetKey, n: int, error: str) -> NodeResult:
    return NodeResult(Node(asset, day(n)), False, f"run-{n}", 10.0, 12.5, error)


def test_a_failed_nodes_error_is_the_users_own_not_dagsters_wrapper():
    users = SerializableErrorInfo(
        "my_project.errors.SourceSchemaError: column amount became a string\n  cast it in the source\n",
        [],
        "SourceSchemaError",
        cause=SerializableErrorInfo("KeyError: 'amount'\n", [], "KeyError"),
    )
    wrapper = SerializableErrorInfo(
        'dagster._core.errors.DagsterExecutionStepExecutionError: Error occurred while executing op "orders":\n',
        [],
        "DagsterExecutionStepExecutionError",
        cause=users,
    )
    # The user's error is kept whole (its own cause is its business); its lines joined.
    assert user_error_line(wrapper) == f"{SCHEMA_ERROR} cast it in the source"
    assert user_error_line(SerializableErrorInfo("ValueError\n", [], "ValueError")) == "ValueError"


def test_the_last_line_groups_failures_by_cause_most_frequent_first_and_keeps_the_fix():
    progress = progress_over_four_days()
    lines = [
        progress.line(failed(orders.key, 1, SCHEMA_ERROR)),
        progress.line(failed(orders.key, 3, "ValueError: no rows")),
        progress.line(failed(orders.key, 2, SCHEMA_ERROR)),
    ]
    assert lines[0] == f"[1/8] orders 1/4 2024-01-01 2.5s FAILED: {SCHEMA_ERROR} (run run-1)"
    status = {Node(orders.key, day(n)): NodeStatus.FAILED for n in (1, 2, 3)}
    status |= {Node(revenue.key, day(n)): NodeStatus.BLOCKED for n in (1, 2, 3)}
    status |= {Node(asset, day(4)): NodeStatus.SUCCEEDED for asset in (orders.key, revenue.key)}
    assert progress.failure(status) == (
        "backfill b1: 3 blocked, 3 failed, 2 succeeded: "
        f"{SCHEMA_ERROR} (2 nodes: orders[2024-01-01], orders[2024-01-02]); "
        "ValueError: no rows (1 node: orders[2024-01-03]); "
        "3 nodes blocked behind them. Fix and run `partition-assets backfill retry b1`."
    )
    assert progress.failure(dict.fromkeys(status, NodeStatus.SUCCEEDED)) is None


def test_the_tally_counts_running_done_and_failed_nodes_and_paces_the_eta():
    now = [100.0]
    progress = progress_over_four_days(clock=lambda: now[0])
    progress.launched(RunUnit(orders.key, (day(1), day(2))))
    now[0] = 130.0  # the first result comes after the workers' and Spark's start-up
    progress.line(failed(orders.key, 1, SCHEMA_ERROR))
    assert progress.tally() == Tally(total=8, done=1, failed=1, running=1, eta_seconds=None)


def test_the_eta_waits_for_three_nodes_and_paces_from_the_first_result_not_the_start():
    """The first ETA was 32m21s for a run that took 2.5 min: its pace counted the start-up."""
    now = [100.0]
    progress = progress_over_four_days(clock=lambda: now[0])
    for n, finished_at in ((1, 130.0), (2, 132.0)):
        now[0] = finished_at
        progress.line(NodeResult(Node(orders.key, day(n)), True, f"run-{n}", 0.0, 1.0))
        assert progress.tally().eta_seconds is None
    now[0] = 134.0
    progress.line(NodeResult(Node(orders.key, day(3)), True, "run-3", 0.0, 1.0))
    # 2 nodes in the 4 s since the first finished: 2 s a node, 10 s for the 5 left.
    assert progress.tally().eta_seconds == 10.0


def test_one_node_is_a_node():
    """`1 nodes blocked` read wrong."""
    progress = progress_over_four_days()
    progress.line(failed(orders.key, 1, SCHEMA_ERROR))
    status = {Node(orders.key, day(1)): NodeStatus.FAILED, Node(revenue.key, day(1)): NodeStatus.BLOCKED}
    assert "; 1 node blocked behind them." in (progress.failure(status) or "")


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_live_line_is_redrawn_in_place_and_failed_nodes_stay_above_it():
    terminal = FakeTerminal()
    live = LiveConsole(terminal)
    live.node("[1/8] orders ... ok (run r1)", Tally(8, 1, 0, 3, 70.0))
    live.node("[2/8] orders ... FAILED: ValueError: no rows (run r2)", Tally(8, 2, 1, 2, 60.0))
    live.line("gate: passed")
    live.close()
    first = "[==>                 ] 1/8 done, 3 running, 0 failed, ETA 1m10s"
    second = "[=====>              ] 2/8 done, 2 running, 1 failed, ETA 1m00s"
    erase = "\r\x1b[K"
    assert terminal.getvalue() == (
        f"{erase}{first}"  # an ok node only redraws the progress line
        f"{erase}[2/8] orders ... FAILED: ValueError: no rows (run r2)\n{second}"
        f"{erase}gate: passed\n{second}"
        f"{erase}"  # closed: the command's last line starts on a clean line
    )
    assert progress_line(Tally(8, 8, 0, 0, None)) == "[====================] 8/8 done, 0 running, 0 failed"


def test_a_staged_backfills_progress_counts_its_nodes_staged_against_published():
    # 3 of 8 finished, 1 of them failed: 2 staged, none published until the backfill's end.
    staged = Tally(8, 3, 1, 2, None, staged=True)
    assert progress_line(staged) == "[=======>            ] 2/8 staged, 0 published, 2 running, 1 failed"
    assert progress_over_four_days(staged=True).tally().staged


@pytest.mark.parametrize("command", ["retry", "resume"])
def test_verbose_reaches_the_environment_node_runs_read(command, monkeypatch):
    monkeypatch.setenv(VERBOSE_ENV, "")  # restored after the test
    # A refused id ends the command before any instance is opened; the flag is read first.
    assert main(["backfill", command, "not an id", "--verbose"]) == 2
    assert os.environ[VERBOSE_ENV] == "1"
    job = dg.Definitions(assets=[orders]).resolve_implicit_global_asset_job_def()
    assert quiet_console_config(job, {}) == {}
    monkeypatch.setenv(VERBOSE_ENV, "")
    assert quiet_console_config(job, {}) == {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}


def test_a_commit_reads_as_before_its_verb_was_a_typed_choice():
    """`Published` says what its commit did as a `Committed` and who approved it; its line is
    the one the commands printed when the verb was a free string."""
    versions = {"daily": 4, "weekly": None}
    shown = describe_versions(versions)
    assert Published("b1", Committed.PUBLISHED, versions).message == f"backfill b1 published: {shown}"
    assert Published("b1", Committed.ROLLED_BACK, versions).message == f"backfill b1 rolled back: {shown}"
    approved = Published("b1", Committed.ROLLED_BACK, versions, approved_by="ann")
    assert approved.message == f"backfill b1 approved by ann and rolled back: {shown}"
