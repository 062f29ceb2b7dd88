"""The format versions of the state other processes read (state_formats.py, issue 55):
a record or coordinator announcement an earlier release wrote (no format field) is read as it
always was, this release writes its own format, and one a newer release wrote is refused by
name, nothing written, never misread: a newer announcement is never taken for "no coordinator"."""

import json
import time
from pathlib import Path

import pytest

from partition_assets.backfill.model import BackfillCommand, BackfillStatus
from partition_assets.backfill.planning.spec import BackfillSpec
from partition_assets.backfill.state.presence import KEY_PREFIX, Presence, coordinating, live_coordinator
from partition_assets.backfill.state.record import BackfillRecord
from partition_assets.backfill.state.store import BACKFILLS, BackfillStore
from partition_assets.dagster_instance.key_values import sql_run_storage, value_of
from partition_assets.errors import CoordinatorLiveError, StateFormatError
from partition_assets.processes.identity import ProcessIdentity
from partition_assets.state_formats import PRESENCE_FORMAT, RECORD_FORMAT
from partition_assets_tests.support.records import SPEC

# A record as the code before stored plans wrote it (commit 0fe2d38), before formats were versioned.
EARLIER_RECORD = Path(__file__).parents[1] / "support" / "record_before_stored_plans.json"
KEY = f"{KEY_PREFIX}/b1"


def _insert(instance, backfill_id: str, status: str, body: dict) -> None:
    """A record row as another release wrote it."""
    with sql_run_storage(instance).connect() as connection:
        connection.execute(
            BACKFILLS.insert().values(
                id=backfill_id, status=status, version=1, body=json.dumps(body), created_at=0, updated_at=0
            )
        )


def _stored_body(instance, backfill_id: str) -> dict:
    with sql_run_storage(instance).connect() as connection:
        return json.loads(connection.execute(BACKFILLS.select().where(BACKFILLS.c.id == backfill_id)).one().body)


def test_a_record_an_earlier_release_wrote_is_read_as_before_and_rewritten_in_this_format(instance):
    saved = json.loads(EARLIER_RECORD.read_text())
    assert "format" not in saved["body"]  # as the code before formats wrote it
    store = BackfillStore(instance)
    _insert(instance, saved["id"], saved["status"], saved["body"])

    record = store.load(saved["id"])

    assert (record.status, record.spec) == (BackfillStatus.FAILED, BackfillSpec.from_json(saved["body"]["spec"]))
    assert record.fingerprints == saved["body"]["fingerprints"] and record.stored_plan is None
    record.launched_by = "ana"
    record.save()
    assert _stored_body(instance, saved["id"])["format"] == RECORD_FORMAT
    assert store.load(saved["id"]).launched_by == "ana"


def test_a_record_in_a_newer_format_is_refused_naming_the_version_and_nothing_is_written(instance):
    """Stands in for an older release meeting a record a newer one wrote (or a downgrade)."""
    store = BackfillStore(instance)
    newer = {**BackfillRecord(SPEC, id="b1", store=store).to_json(), "format": RECORD_FORMAT + 1, "spec": "reshaped"}
    _insert(instance, "b1", "running", newer)

    with pytest.raises(StateFormatError) as refused:
        store.load("b1")

    assert f"backfill b1 is in format {RECORD_FORMAT + 1}" in str(refused.value)
    assert f"reads formats 1 to {RECORD_FORMAT}" in str(refused.value)
    assert "Upgrade partition_assets on this host" in str(refused.value) and "Nothing was written" in str(refused.value)
    assert _stored_body(instance, "b1") == newer


def _announce(instance, fields: dict) -> None:
    instance.run_storage.set_cursor_values({KEY: json.dumps(fields)})


def test_an_announcement_an_earlier_release_wrote_is_read_as_before_and_this_release_writes_its_format(instance):
    """A live coordinator of an earlier release (no format field) still holds its backfill."""
    earlier = Presence(ProcessIdentity("another-host", 4242), "token", time.time())
    _announce(
        instance,
        {"process": {"host": "another-host", "pid": 4242}, "token": "token", "heartbeat_at": earlier.heartbeat_at},
    )

    assert live_coordinator(instance, "b1") == earlier
    with pytest.raises(CoordinatorLiveError, match="pid 4242 on another-host"):
        with coordinating(instance, "b1", BackfillCommand.RESUME):
            pass
    instance.run_storage.set_cursor_values({KEY: ""})  # let go
    with coordinating(instance, "b1", BackfillCommand.RESUME):
        assert json.loads(value_of(instance, KEY) or "{}")["format"] == PRESENCE_FORMAT


def test_an_announcement_in_a_newer_format_is_refused_never_taken_for_no_coordinator(instance):
    """Stands in for an older release meeting a newer coordinator's announcement: it must not
    claim the backfill that coordinator holds."""
    newer = {"format": PRESENCE_FORMAT + 1, "holder": {"host": "another-host"}, "beat": time.time()}
    _announce(instance, newer)

    for read in (
        lambda: live_coordinator(instance, "b1"),
        lambda: coordinating(instance, "b1", BackfillCommand.RESUME).__enter__(),
    ):
        with pytest.raises(StateFormatError) as refused:
            read()
        assert f"announcement of backfill b1 is in format {PRESENCE_FORMAT + 1}" in str(refused.value)
        assert f"reads formats 1 to {PRESENCE_FORMAT}" in str(refused.value)
    assert json.loads(value_of(instance, KEY) or "{}") == newer  # not claimed
