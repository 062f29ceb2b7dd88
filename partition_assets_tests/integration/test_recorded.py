"""The commands on a recorded backfill (backfill/commands/recorded.py), called as every surface
calls them, on a real instance whose records a test sets up: each refuses, before anything is
written, an unknown or malformed id, a status it does not accept (the status table,
backfill/state/status.py, for every command and status), and, for those that act as the
coordinator, a live one; what only reads answers while a coordinator is live; pause, unpause
and cancel move the status and say so; a retry with no failed node runs nothing; and the list
holds every record. No node runs, no Spark: the records' code location (support/records.py
SPEC) sleeps in place of work, and no test here starts it.
"""

import dagster as dg
import pytest

from partition_assets.backfill.commands import (
    SilentConsole,
    approve_backfill,
    backfill_ledger,
    backfill_status,
    cancel_backfill,
    diff_backfill,
    discard_backfill,
    list_backfills,
    pause_backfill,
    publish_backfill,
    resume_backfill,
    retry_backfill,
    rollback_backfill,
    unpause_backfill,
)
from partition_assets.backfill.model import BackfillCommand, BackfillStatus
from partition_assets.backfill.state.status import COMMANDS
from partition_assets.backfill.state.store import BackfillStore
from partition_assets.errors import (
    BackfillIdError,
    CoordinatorLiveError,
    IllegalTransitionError,
    UnknownBackfillError,
)
from partition_assets_tests.support.records import SPEC, announce, record_at, version_of

C = BackfillCommand
S = BackfillStatus

# Each status-changing command of recorded.py, as a surface calls it. `extend` is
# commands/extending.py's (test_backfill_extend.py).
CHANGING = {
    C.RESUME: lambda instance, backfill_id: resume_backfill(instance, backfill_id, SilentConsole()),
    C.RETRY: lambda instance, backfill_id: retry_backfill(instance, backfill_id, SilentConsole()),
    C.CANCEL: cancel_backfill,
    C.PAUSE: pause_backfill,
    C.UNPAUSE: unpause_backfill,
    C.PUBLISH: publish_backfill,
    C.APPROVE: lambda instance, backfill_id: approve_backfill(instance, backfill_id, "ann"),
    C.DISCARD: discard_backfill,
    C.ROLLBACK: rollback_backfill,
}
READING = {"status": backfill_status, "diff": diff_backfill, "ledger": backfill_ledger}
# The commands that act as the backfill's coordinator, each with a status it accepts.
COORDINATING = {
    C.RESUME: S.RUNNING,
    C.RETRY: S.FAILED,
    C.PUBLISH: S.GATE_FAILED,
    C.APPROVE: S.AWAITING_APPROVAL,
    C.DISCARD: S.FAILED,
    C.ROLLBACK: S.PUBLISHED,
}


def test_every_status_changing_command_but_extend_is_called_here():
    assert set(CHANGING) == set(COMMANDS) - {C.EXTEND}


def test_a_command_refuses_every_status_its_row_of_the_status_table_lacks_and_writes_nothing(instance):
    store = BackfillStore(instance)
    refused = 0
    for command, call in CHANGING.items():
        for status in set(S) - set(COMMANDS[command]):
            backfill_id = f"{command.value.replace('-', '_')}_{status.value}"
            record_at(store, backfill_id, status, SPEC)
            version = version_of(store, backfill_id)
            with pytest.raises(IllegalTransitionError, match=f"backfill {backfill_id}") as refusal:
                call(instance, backfill_id)
            assert status.value in str(refusal.value), refusal.value
            assert (store.status(backfill_id), version_of(store, backfill_id)) == (status, version), backfill_id
            refused += 1
    assert refused > len(CHANGING)  # every command refuses some status


@pytest.mark.parametrize(("command", "accepted"), COORDINATING.items(), ids=[c.value for c in COORDINATING])
def test_a_coordinating_command_is_refused_while_a_coordinator_is_live_and_writes_nothing(instance, command, accepted):
    store = BackfillStore(instance)
    record_at(store, "held", accepted, SPEC)
    announce(instance, "held", seconds_ago=1)
    version = version_of(store, "held")
    with pytest.raises(CoordinatorLiveError, match="backfill held has a live coordinator") as refusal:
        CHANGING[command](instance, "held")
    assert "Nothing was changed." in str(refusal.value)
    assert (store.status("held"), version_of(store, "held")) == (accepted, version)


def test_status_and_the_list_answer_while_a_coordinator_is_live(instance):
    store = BackfillStore(instance)
    record_at(store, "live", S.RUNNING, SPEC)
    record_at(store, "done", S.PUBLISHED, SPEC)
    announce(instance, "live", seconds_ago=1)
    report = backfill_status(instance, "live")
    assert (report.record.id, report.record.status, report.silence) == ("live", S.RUNNING, None)
    assert [standing.record.id for standing in list_backfills(instance).standings] == ["live", "done"]


@pytest.mark.parametrize(("backfill_id", "error"), [("nosuch", UnknownBackfillError), ("../x", BackfillIdError)])
def test_an_unknown_or_malformed_id_is_refused_by_every_command_and_nothing_is_recorded(instance, backfill_id, error):
    for name, call in {**{command.value: call for command, call in CHANGING.items()}, **READING}.items():
        with pytest.raises(error):
            call(instance, backfill_id)
        assert BackfillStore(instance).ids() == [], name


def test_pause_and_unpause_move_the_status_and_say_so_a_second_pause_changes_nothing(instance):
    store = BackfillStore(instance)
    record_at(store, "bf", S.RUNNING, SPEC)
    paused = pause_backfill(instance, "bf")
    assert (paused.paused, store.status("bf")) == (True, S.PAUSED)
    assert paused.message == "backfill bf paused: it launches nothing new, its runs in flight finish"
    assert pause_backfill(instance, "bf").paused and store.status("bf") == S.PAUSED
    unpaused = unpause_backfill(instance, "bf")
    assert (unpaused.paused, store.status("bf")) == (False, S.RUNNING)
    assert unpaused.message == "backfill bf unpaused: it launches its nodes again"


def test_cancel_without_a_coordinator_cancels_the_backfill_now_and_counts_its_runs_in_flight(instance):
    store = BackfillStore(instance)
    record_at(store, "bf", S.FAILED, SPEC)
    canceled = cancel_backfill(instance, "bf")
    assert (canceled.backfill_id, canceled.runs_canceled, store.status("bf")) == ("bf", 0, S.CANCELED)


def test_a_retry_with_no_failed_node_runs_nothing_and_keeps_the_status(instance):
    store = BackfillStore(instance)
    record_at(store, "bf", S.FAILED, SPEC)
    outcome = retry_backfill(instance, "bf", SilentConsole())
    assert (outcome.succeeded, outcome.message) == (True, "backfill bf has no failed nodes")
    assert store.status("bf") == S.FAILED
    assert instance.get_runs(dg.RunsFilter()) == []
