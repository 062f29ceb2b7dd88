"""A backfill's status as a state machine (backfill/state/status.py) kept in the instance's
database (backfill/state/store.py): the transition table, compare-and-set, refusals that
write nothing, and the migration of the record files earlier releases wrote."""

import json
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pytest

from partition_assets.backfill.model import Approval, BackfillCommand, BackfillStatus, Node
from partition_assets.backfill.state.record import by_asset, cancel, nodes_of
from partition_assets.backfill.state.status import (
    COMMANDS,
    FINAL_STATUSES,
    TRANSITIONS,
    check_command,
    check_transition,
    is_allowed,
)
from partition_assets.backfill.state.store import SCHEMA, BackfillStore
from partition_assets.errors import IllegalTransitionError, StoreSchemaError, UnknownBackfillError
from partition_assets.state_formats import BACKFILL_TABLES_FORMAT
from partition_assets_tests.support.records import SPEC, record_at, version_of

S = BackfillStatus


def test_every_status_has_a_row_the_ends_lead_nowhere_and_every_command_move_is_a_transition():
    assert set(TRANSITIONS) == set(BackfillStatus)
    # nothing leads out of the three ends; a published backfill can still be rolled back
    assert {status for status in S if not TRANSITIONS[status]} == {S.DONE, S.DISCARDED, S.ROLLED_BACK}
    assert FINAL_STATUSES == {S.DONE, S.DISCARDED, S.ROLLED_BACK, S.PUBLISHED}
    for command, moves in COMMANDS.items():
        for current, target in moves.items():
            assert is_allowed(current, target), (command, current, target)
    # the two holes of the string status: a cancel of a published backfill, and the job's overwrite of publishing
    assert not is_allowed(S.PUBLISHED, S.CANCELED) and not is_allowed(S.PUBLISHING, S.CANCELED)


def test_the_table_has_every_move_the_code_makes():
    # An approved backfill's publish refused by a foreign commit (issue 39, hole 9).
    assert is_allowed(S.AWAITING_APPROVAL, S.PUBLISH_REFUSED)
    # An error or interrupt in any phase of a running (or paused) backfill fails it.
    assert is_allowed(S.RUNNING, S.FAILED) and is_allowed(S.PAUSED, S.FAILED)
    # A run of a backfill awaiting approval is refused: it stays parked until approved or discarded.
    assert not is_allowed(S.AWAITING_APPROVAL, S.RUNNING)


def test_a_transition_is_a_compare_and_set_and_a_refused_one_writes_nothing(instance):
    store = BackfillStore(instance)
    record = record_at(store, "b1", S.RUNNING, SPEC)
    before = version_of(store, "b1")
    record.move_to(S.PUBLISHING, "coordinate")
    assert store.status("b1") == S.PUBLISHING and version_of(store, "b1") == before + 1
    with pytest.raises(IllegalTransitionError, match="is publishing: cannot cancel it"):
        cancel(store, "b1")
    assert store.status("b1") == S.PUBLISHING and version_of(store, "b1") == before + 1
    # `save` never writes the status: a stale object cannot undo a change made elsewhere
    record.status = S.RUNNING
    record.save()
    assert store.status("b1") == S.PUBLISHING


def test_a_stale_writer_checks_its_transition_against_the_status_it_replaces(instance):
    """The coordinator read running, a cancel landed since: its move to publishing is refused."""
    store = BackfillStore(instance)
    coordinator = record_at(store, "b1", S.RUNNING, SPEC)
    cancel(store, "b1")
    assert coordinator.status == S.RUNNING  # what it last read
    with pytest.raises(IllegalTransitionError, match="is canceled"):
        coordinator.move_to(S.PUBLISHING, "coordinate")
    assert store.status("b1") == S.CANCELED


def test_an_unknown_backfill_lists_the_recorded_ones(instance):
    store = BackfillStore(instance)
    record_at(store, "known1", S.RUNNING, SPEC)
    with pytest.raises(UnknownBackfillError, match="known: known1"):
        cancel(store, "nope")


def test_record_files_of_earlier_releases_move_into_the_instance_on_first_use(instance):
    legacy = Path(instance.root_directory) / "partition_assets" / "backfills"
    legacy.mkdir(parents=True)
    saved = {
        "id": "old1",
        "status": "published",
        "spec": SPEC.to_json(),
        "fingerprints": {"a": {'["2024-01-01"]': ["part-0.parquet"]}},
        "published_versions": {"a": 7},
        "created": {"a": ["2024-01-02"]},
        "pinned_inputs": None,
    }
    (legacy / "old1.json").write_text(json.dumps(saved))
    (legacy / "standby.log").write_text("logs stay where they are")

    store = BackfillStore(instance)

    record = store.load("old1")
    assert (record.status, record.spec, record.fingerprints, record.published_versions, record.created) == (
        S.PUBLISHED,
        SPEC,
        saved["fingerprints"],
        {"a": 7},
        {"a": ["2024-01-02"]},
    )
    assert sorted(path.name for path in legacy.iterdir()) == ["old1.json.migrated", "standby.log"]
    BackfillStore(instance)  # a second first use finds nothing left to move
    assert store.ids() == ["old1"]


def test_tables_of_a_newer_schema_are_refused(instance):
    BackfillStore(instance)
    store = BackfillStore(instance)
    with store._connect() as connection:
        connection.execute(SCHEMA.update().values(version=BACKFILL_TABLES_FORMAT + 1))
    with pytest.raises(StoreSchemaError, match=f"in format {BACKFILL_TABLES_FORMAT + 1}"):
        BackfillStore(instance)


def test_a_record_keeps_its_kind_what_its_catch_up_skipped_and_its_rollback_request(instance):
    """What every path that continues a backfill reads from its record alone (issue 50): whether
    it is a retract, the nodes a --catch-up start left alone, who asked for its rollback."""
    store = BackfillStore(instance)
    skipped = [Node(dg.AssetKey("orders"), "2024-01-01"), Node(dg.AssetKey(["lake", "revenue"]), "2024-01-02")]
    record = record_at(store, "b1", S.PUBLISHED, SPEC)
    record.skipped = by_asset(skipped)
    record.retracted = by_asset(skipped[:1])
    record.rollback_approval = Approval(awaiting_since=datetime(2024, 3, 1, tzinfo=UTC), requested_by="ana")
    record.save()

    loaded = store.load("b1")

    assert nodes_of(loaded.skipped) == skipped and loaded.is_retract
    assert loaded.rollback_approval == record.rollback_approval
    earlier = record_at(store, "b2", S.RUNNING, SPEC)  # a record that holds none of them
    assert not store.load(earlier.id).is_retract and store.load(earlier.id).rollback_approval is None


def test_what_asks_for_a_status_change_is_a_command_named_by_the_word_refusals_always_used():
    """The coordinator's own steps are `BackfillCommand.COORDINATE`, not a free word; a caller
    still passing the word (a StrEnum equals it) gets the same refusal."""
    refusals = []
    for action in (BackfillCommand.COORDINATE, "coordinate"):
        with pytest.raises(IllegalTransitionError) as refused:
            check_transition("b1", S.DONE, S.PUBLISHING, action)
        refusals.append(str(refused.value))
    assert refusals[0] == refusals[1]
    assert refusals[0].startswith(
        "backfill b1 is done: cannot coordinate it, a done backfill may not become publishing"
    )


def test_a_paused_backfill_s_refusal_names_resume_for_when_no_coordinator_runs():
    """`extend` leaves a backfill paused with no coordinator: `unpause` alone would launch nothing."""
    with pytest.raises(IllegalTransitionError) as refused:
        check_command("b1", S.PAUSED, BackfillCommand.APPROVE)
    assert "`partition-assets backfill resume b1` runs them" in str(refused.value)
    assert "Nothing was written." in str(refused.value)
