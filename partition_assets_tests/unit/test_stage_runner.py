"""The stage runner (backfill/publishing/stage_runner.py) with stages of a test's own, over a
real backfill record: it walks the declared order, records the last stage finished in the
record by compare-and-set, resumes at the first unfinished stage, and a stage that raises or
stops the walk stops it there, recorded as not finished. And the publishing stages' list as
`backfill status --verbose` prints it for a recorded backfill."""

from dataclasses import dataclass

import dagster as dg
import pytest

from partition_assets.backfill.model import BackfillCommand, BackfillStatus
from partition_assets.backfill.publishing.stage_runner import (
    RecordedProgress,
    Stage,
    StageResult,
    StageState,
    first_unfinished,
    stage_states,
    walk,
)
from partition_assets.backfill.publishing.stages import PUBLISH_STAGES, PublishStage, stage_lines, start_after_nodes
from partition_assets.backfill.state.store import BackfillStore
from partition_assets.cli.main import main
from partition_assets.errors import RecordChangedError
from partition_assets.storage.failpoints import POINTS, STAGE_POINTS
from partition_assets_tests.support.records import SPEC, record_at

S = BackfillStatus
P = PublishStage


@dataclass(frozen=True)
class Ran(StageResult):
    name: str


@dataclass(frozen=True)
class Halted(StageResult):
    goes_on = False


class Broken(RuntimeError):
    pass


def stages(ran: list[str], raising: str = "", halting: str = "") -> list[Stage[None]]:
    """Stages a, b, c, d, each appending its name to `ran`; `raising` raises, `halting` stops the walk."""

    def stage(name: str) -> Stage[None]:
        def run(_: None) -> StageResult:
            ran.append(name)
            if name == raising:
                raise Broken(name)
            return Halted() if name == halting else Ran(name)

        return Stage(name, f"stage {name}", run)

    return [stage(name) for name in "abcd"]


@pytest.fixture
def record(instance):
    return record_at(BackfillStore(instance), "b1", BackfillStatus.RUNNING, SPEC)


def stored_stage(record) -> str | None:
    return record.store.load(record.id).publish_stage


def test_it_walks_the_declared_order_and_records_each_stage_finished(record):
    ran: list[str] = []
    walked = walk(stages(ran), None, RecordedProgress(record), "a")
    assert ran == ["a", "b", "c", "d"] and walked.finished
    assert walked.results == {name: Ran(name) for name in "abcd"}
    assert stored_stage(record) == "d"


def test_a_failing_stage_stops_the_walk_recorded_where_it_was_and_the_next_walk_resumes_there(record):
    ran: list[str] = []
    with pytest.raises(Broken):
        walk(stages(ran, raising="c"), None, RecordedProgress(record), "a")
    assert ran == ["a", "b", "c"]
    assert stored_stage(record) == "b"  # c raised: not finished

    resumed = record.store.load(record.id)  # as a new process reads it
    start = first_unfinished(stages([]), resumed.publish_stage, at_least="a")
    assert start == "c"
    again: list[str] = []
    walk(stages(again), None, RecordedProgress(resumed), start)
    assert again == ["c", "d"]  # a and b, done, are not run again
    assert stored_stage(record) == "d"
    assert first_unfinished(stages([]), "d", at_least="a") is None


def test_a_stage_that_stops_the_walk_is_not_recorded_finished(record):
    ran: list[str] = []
    walked = walk(stages(ran, halting="b"), None, RecordedProgress(record), "a")
    assert ran == ["a", "b"] and walked.stopped_at == "b" and not walked.finished
    assert stored_stage(record) == "a"


def test_a_walk_from_a_later_stage_records_the_one_before_it_and_one_from_the_first_forgets_all(record):
    walk(stages([]), None, RecordedProgress(record), "c")  # e.g. `approve`: from the table commits on
    assert stored_stage(record) == "d"
    with pytest.raises(Broken):
        walk(stages([], raising="a"), None, RecordedProgress(record), "a")  # a fresh gate after new nodes
    assert stored_stage(record) is None  # the earlier walk's stages are forgotten before the first runs
    assert first_unfinished(stages([]), None, at_least="c") == "c"


def test_the_progress_is_written_by_compare_and_set_never_over_another_writer(record):
    other = record.store.load(record.id)
    other.launched_by = "another process"
    other.save()
    with pytest.raises(RecordChangedError):
        walk(stages([]), None, RecordedProgress(record), "a")
    assert stored_stage(record) is None and record.store.load(record.id).launched_by == "another process"


def test_each_stage_is_done_next_or_pending():
    states = [(stage.name, state) for stage, state in stage_states(stages([]), "b")]
    assert states == [("a", StageState.DONE), ("b", StageState.DONE), ("c", StageState.NEXT), ("d", StageState.PENDING)]


def test_every_publishing_stage_has_a_named_failpoint_in_the_declared_order():
    assert [stage.name for stage in PUBLISH_STAGES] == list(PublishStage)
    assert tuple(stage.failpoint for stage in PUBLISH_STAGES) == STAGE_POINTS
    assert set(STAGE_POINTS) <= set(POINTS)


def test_status_verbose_prints_the_publishing_stages_with_each_stage_state(home, capsys):
    with dg.DagsterInstance.from_config(str(home)) as instance:
        record = record_at(BackfillStore(instance), "b1", BackfillStatus.PUBLISHING, SPEC)
        record.publish_stage = PublishStage.RELEASE
        record.save()

    assert main(["backfill", "status", "b1", "--verbose"]) == 0

    printed = capsys.readouterr().out
    listed = printed[printed.index("publishing stages:") :].splitlines()[1 : len(PUBLISH_STAGES) + 1]
    assert [line.split()[1:3] for line in listed] == [
        ["done", "gate:"],
        ["done", "approval:"],
        ["done", "commit_tables:"],
        ["done", "release:"],
        ["next", "dagster_records:"],
        ["pending", "ledger:"],
        ["pending", "notify:"],
        ["pending", "published:"],
    ]
    assert main(["backfill", "status", "b1"]) == 0
    assert "publishing stages" not in capsys.readouterr().out  # only with --verbose


@pytest.mark.parametrize(
    ("entered", "last_finished", "nodes_left", "start", "kept"),
    [
        # A coordinator that died publishing: from the first unfinished stage, the commits at the earliest
        # (a record of an earlier release keeps no stage).
        (S.PUBLISHING, P.RELEASE, False, P.DAGSTER_RECORDS, P.RELEASE),
        (S.PUBLISHING, None, False, P.COMMIT_TABLES, None),
        # One that died after its gate, every node done: the gate is not evaluated again.
        (S.RUNNING, P.GATE, False, P.APPROVAL, P.GATE),
        # Nodes left to run stage new data: the gate evaluates it anew, the earlier walk forgotten now.
        (S.RUNNING, P.GATE, True, P.GATE, None),
        # A publish refused, a cancel, a failure: `resume` gates the staging as it is now.
        (S.PUBLISH_REFUSED, P.APPROVAL, False, P.GATE, None),
        (S.CANCELED, P.GATE, False, P.GATE, None),
        (S.FAILED, None, False, P.GATE, None),
    ],
)
def test_the_coordinator_s_walk_starts_where_its_record_says_unless_new_data_was_staged(
    record, entered, last_finished, nodes_left, start, kept
):
    record.publish_stage = last_finished
    record.save()
    assert start_after_nodes(record, entered, nodes_left) == start
    assert stored_stage(record) == kept  # decided, and recorded, before any node runs


def test_a_backfill_published_by_an_earlier_release_shows_every_stage_done(record):
    record.move_to(S.PUBLISHING, BackfillCommand.COORDINATE)
    record.move_to(S.PUBLISHED, BackfillCommand.PUBLISH)
    assert record.publish_stage is None
    assert all(" done " in line for line in stage_lines(record))
