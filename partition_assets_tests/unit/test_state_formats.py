"""The format versions of the state other processes read (state_formats.py, issue 55): state
an earlier release wrote (no format) is read as it always was, this release writes its own
format, and state a newer release wrote is refused by name, nothing written, never misread: a
newer announcement is never taken for "no coordinator", a newer lease never for no lease.

The earlier release's state is real: written by commit d216097 (support/older_releases). The
newer release is stood in for by this release's own writes, read by a stand-in for an older
release that checks formats: this release's code with the kind's format lowered by one.
"""

import json
import re
import shutil
import time
from dataclasses import replace
from pathlib import Path
from unittest.mock import ANY

import dagster as dg
import pyarrow as pa
import pytest
from deltalake import DeltaTable

import partition_assets
from partition_assets.backfill.model import BackfillCommand, BackfillStatus, Node
from partition_assets.backfill.planning.instance_state import graph_of
from partition_assets.backfill.planning.spec import BackfillSpec
from partition_assets.backfill.state import ledger as ledger_module
from partition_assets.backfill.state import record as record_module
from partition_assets.backfill.state.ledger import Ledger, LedgerEntry, LedgerStatus, ledger_uri
from partition_assets.backfill.state.presence import KEY_PREFIX, Presence, coordinating, live_coordinator
from partition_assets.backfill.state.record import BackfillRecord, skipped_as_current
from partition_assets.backfill.state.skipped_ranges import stored_skipped
from partition_assets.backfill.state.store import BackfillStore
from partition_assets.backfill.state.stored_plan import graph_from, recorded_graph, stored_plan
from partition_assets.dagster_instance.key_values import value_of
from partition_assets.deploy import deployments as deployments_module
from partition_assets.deploy.deployments import DEPLOYS_DIR, Deployment, deployments, load_deployment, save_deployment
from partition_assets.errors import CoordinatorLiveError, PartitionLeasedError, StateFormatError
from partition_assets.processes.identity import ProcessIdentity
from partition_assets.spark import connect_server
from partition_assets.spark.connect_server import LocalConnectServer
from partition_assets.state_formats import (
    DEPLOY_RECORD_FORMAT,
    FINGERPRINT_FORMAT,
    LEASE_FORMAT,
    LEDGER_FORMAT,
    MANIFEST_FORMAT,
    PRESENCE_FORMAT,
    RECORD_FORMAT,
    RELEASE_LOG_FORMAT,
    SPARK_IDENTITY_FORMAT,
    SPARK_PID_FORMAT,
    STORED_PLAN_FORMAT,
    TABLE_FORMAT_PROPERTY,
    VERSIONED_STATE,
)
from partition_assets.storage import backfill_staging, leases, release_log
from partition_assets.storage.backfill_staging import (
    StagingFingerprint,
    listed_layout_paths,
    read_staged,
    record_staging,
    staging_fingerprint,
)
from partition_assets.storage.delta import DeltaFormat
from partition_assets.storage.partition_scope import PartitionScope
from partition_assets.storage.release_log import append_release, begin_release, read_log, release_log_uri
from partition_assets.storage.release_reads import pinned_versions, releases
from partition_assets.storage.write_staging import StagedWrite
from partition_assets_tests.support.lakehouse import TABLES
from partition_assets_tests.support.older_releases import FOLDER as OLDER_RELEASES
from partition_assets_tests.support.older_releases import insert_record, older_state, stored_body
from partition_assets_tests.support.records import SPEC

# A record as the code before stored plans wrote it (commit 0fe2d38), before formats were versioned.
EARLIER_RECORD = Path(__file__).parents[1] / "support" / "record_before_stored_plans.json"
KEY = f"{KEY_PREFIX}/b1"


def test_a_record_an_earlier_release_wrote_is_read_as_before_and_rewritten_in_this_format(instance):
    saved = json.loads(EARLIER_RECORD.read_text())
    assert "format" not in saved["body"]  # as the code before formats wrote it
    store = BackfillStore(instance)
    insert_record(instance, saved["id"], saved["status"], saved["body"])

    record = store.load(saved["id"])

    assert (record.status, record.spec) == (BackfillStatus.FAILED, BackfillSpec.from_json(saved["body"]["spec"]))
    assert record.fingerprints == saved["body"]["fingerprints"] and record.stored_plan is None
    record.launched_by = "ana"
    record.save()
    assert stored_body(instance, saved["id"])["format"] == RECORD_FORMAT
    assert store.load(saved["id"]).launched_by == "ana"


# A --catch-up record as the code of record format 3 wrote it (commit b53e8c3): its skipped
# partitions listed, of the example's time, static, multi-partitioned assets.
CATCH_UP_RECORD_3 = Path(__file__).parents[1] / "support" / "record_format_3_catch_up.json"


def test_a_format_3_catch_up_record_s_listed_skips_are_read_exactly_and_kept_when_saved_again(instance):
    saved = json.loads(CATCH_UP_RECORD_3.read_text())
    assert saved["body"]["format"] == 3
    insert_record(instance, saved["id"], saved["status"], saved["body"])
    store = BackfillStore(instance)
    record = store.load(saved["id"])
    graph = recorded_graph(record, instance)
    listed = {Node(dg.AssetKey.from_user_string(a), p) for a, keys in saved["body"]["skipped"].items() for p in keys}

    current = skipped_as_current(record, graph)

    assert set(current) == listed and len(current) == len(listed) == 91
    assert {key.to_user_string(): current.count(key) for key in graph.slices if current.count(key)} == {
        asset: len(keys) for asset, keys in saved["body"]["skipped"].items()
    }
    record.launched_by = "ana"
    record.save()  # in this release's format, the listed keys kept as they were
    assert stored_body(instance, saved["id"])["format"] == RECORD_FORMAT
    assert set(skipped_as_current(store.load(saved["id"]), graph)) == listed


def test_a_catch_up_record_this_release_writes_holds_runs_that_a_reader_of_the_format_before_refuses(
    instance, monkeypatch
):
    """The runs would be misread as keys by a reader of format 3: it refuses them, naming the format."""
    store = BackfillStore(instance)
    spec = replace(SPEC, end="2024-01-31", catch_up=True)
    graph = graph_of(spec, instance)
    current = [node for node in graph.nodes() if node.partition not in ("2024-01-10", "2024-01-20")]
    BackfillRecord(
        spec, id="b1", store=store, skipped=stored_skipped(graph, current), stored_plan=stored_plan(graph)
    ).save()
    body = stored_body(instance, "b1")
    assert set(skipped_as_current(store.load("b1"), graph)) == set(current)
    assert body["skipped"] == {"raw": {"starts": ANY, "stops": ANY}}  # two gaps: three runs, no key listed

    monkeypatch.setattr(record_module, "RECORD_FORMAT", RECORD_FORMAT - 1)  # the reader of the release before
    with pytest.raises(StateFormatError) as refused:
        store.load("b1")

    assert f"backfill b1 is in format {RECORD_FORMAT}, which this release" in str(refused.value)
    assert f"reads formats 1 to {RECORD_FORMAT - 1}" in str(refused.value) and "Nothing was written" in str(
        refused.value
    )
    assert stored_body(instance, "b1") == body


def test_a_record_in_a_newer_format_is_refused_naming_the_version_and_nothing_is_written(instance):
    """Stands in for an older release meeting a record a newer one wrote (or a downgrade)."""
    store = BackfillStore(instance)
    newer = {**BackfillRecord(SPEC, id="b1", store=store).to_json(), "format": RECORD_FORMAT + 1, "spec": "reshaped"}
    insert_record(instance, "b1", "running", newer)

    with pytest.raises(StateFormatError) as refused:
        store.load("b1")

    assert f"backfill b1 is in format {RECORD_FORMAT + 1}" in str(refused.value)
    assert f"reads formats 1 to {RECORD_FORMAT}" in str(refused.value)
    assert "Upgrade partition_assets on this host" in str(refused.value) and "Nothing was written" in str(refused.value)
    assert stored_body(instance, "b1") == newer


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


def _refusal(read, what: str, found: int, reads: int) -> str:
    """The StateFormatError `read()` raises, checked to name `what`, the format found and those read."""
    with pytest.raises(StateFormatError) as refused:
        read()
    message = str(refused.value)
    readable = "format 1" if reads == 1 else f"formats 1 to {reads}"
    assert f"{what} is in format {found}, which this release of partition_assets cannot read" in message
    assert f"(it reads {readable})" in message
    assert "Upgrade partition_assets on this host" in message and "Nothing was written." in message
    return message


def _files(folder: Path) -> dict[str, bytes]:
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


# The earlier release's state (support/older_releases), read by this release.


def test_an_earlier_release_s_leases_ledger_release_log_and_staging_are_read_as_before(tmp_path, instance):
    older = older_state("d216097", tmp_path, instance)
    lake, bid = str(older.lake), older.gate_failed
    scope = PartitionScope(("ds",), frozenset({("2024-01-01",)}))

    record = BackfillStore(instance).load(bid)
    assert record.status == BackfillStatus.GATE_FAILED and set(record.gated_staging) == set(TABLES)
    for table in TABLES:
        uri = f"{lake}/{table}"
        (held,) = leases.held_by(uri, bid)
        assert held.parked and held.partitions == {("2024-01-01",), ("2024-01-02",)}
        with pytest.raises(PartitionLeasedError, match=f"backfill {bid} stopped with staged, unpublished data"):
            leases.check_write(uri, scope, "production-run")
        # Its manifests are read, and its staging holds what the earlier release's gate fingerprinted.
        staged = DeltaFormat().staged(uri, bid)
        assert staged is not None and set(staged.files_by_partition) == {("2024-01-01",), ("2024-01-02",)}
        gated = StagingFingerprint.from_json(record.gated_staging[table], f"the fingerprint of {table}")
        assert staging_fingerprint(staged).holds_as(gated)
        assert listed_layout_paths(uri) == {file.path for file in staged.files}

    ledger = Ledger(ledger_uri(lake))
    assert {(e.asset, e.partition, e.status) for e in ledger.latest(bid)} == {
        (table, day, LedgerStatus.GATE_FAILED) for table in TABLES for day in ("2024-01-01", "2024-01-02")
    }
    assert {e.status for e in ledger.latest(older.published)} == {LedgerStatus.PUBLISHED}
    (published,) = releases(lake)
    assert published.backfill_id == older.published and published.versions == dict.fromkeys(TABLES, 0)
    assert pinned_versions(lake, list(TABLES)).versions == dict.fromkeys(TABLES, 0)

    # This release appends to the earlier ledger and release log, which stay readable by both.
    ledger.append([LedgerEntry(backfill_id=bid, asset="orders", partition="2024-01-01", status=LedgerStatus.DISCARDED)])
    append_release(lake, "rollback", older.published, {})
    assert ledger.latest(bid)[0].status == LedgerStatus.DISCARDED and len(releases(lake)) == 2
    for table in (ledger_uri(lake), release_log_uri(lake)):
        assert TABLE_FORMAT_PROPERTY not in DeltaTable(table).metadata().configuration  # still format 1


def test_an_earlier_release_s_spark_server_files_and_deploy_record_are_read_as_before(tmp_path):
    """Written by commit 1d80543's record_server, identity write and save_deployment (support/older_releases)."""
    older = OLDER_RELEASES / "1d80543"
    shutil.copytree(older / "spark", tmp_path / "spark")
    server = LocalConnectServer(port=15002, state_dir=tmp_path / "spark")
    assert "format" not in json.loads(server.pid_path.read_text())
    assert server.recorded_server() == ProcessIdentity("older-host", 4242, "boot-1", "pid:[4026531836]", 123456)
    # Its identity is read: the check goes on to the server it records (long gone), not "none recorded".
    assert "records no server of its own" not in (server.foreign_server() or "")

    shutil.copytree(older / "deploys", tmp_path / DEPLOYS_DIR)
    (deployed,) = deployments(tmp_path)
    assert (deployed.location, deployed.port, deployed.process.pid) == ("defs@1d8054300000", 40123, 4243)
    # This release writes its format; the record reads back the same.
    save_deployment(tmp_path, deployed)
    (record,) = (tmp_path / DEPLOYS_DIR).glob("*.json")
    assert json.loads(record.read_text())["format"] == DEPLOY_RECORD_FORMAT
    assert load_deployment(record) == deployed


# A newer release's state, refused by a stand-in for an older release that checks formats.


def test_a_lease_in_a_newer_format_is_refused_never_taken_for_no_lease(tmp_path, monkeypatch):
    uri = str(tmp_path / "orders")
    scope = PartitionScope(("ds",), frozenset({("2024-01-01",)}))
    newer = leases.acquire(uri, "b-newer", "backfill", scope)
    folder = tmp_path / "orders" / "_leases"
    assert json.loads((folder / "b-newer.json").read_text())["format"] == LEASE_FORMAT
    before = _files(folder)
    monkeypatch.setattr(leases, "LEASE_FORMAT", LEASE_FORMAT - 1)

    what = f"the lease of b-newer on {uri} ({folder / 'b-newer.json'})"
    for read in (
        lambda: leases.check_write(uri, scope, "run-1"),
        lambda: leases.acquire(uri, "b-older", "backfill", scope),
        lambda: leases.leases(uri),
    ):
        _refusal(read, what, LEASE_FORMAT, LEASE_FORMAT - 1)
    # The holder's own heartbeat, meeting its lease rewritten by a newer coordinator, has lost it.
    assert leases.refresh(newer) is False
    assert _files(folder) == before


def test_a_ledger_in_a_newer_format_is_refused_neither_read_nor_appended_to(tmp_path, monkeypatch):
    ledger = Ledger(ledger_uri(str(tmp_path)))
    entry = LedgerEntry(backfill_id="b1", asset="orders", partition="2024-01-01", status=LedgerStatus.STAGED)
    ledger.append([entry])
    assert DeltaTable(ledger.uri).metadata().configuration[TABLE_FORMAT_PROPERTY] == str(LEDGER_FORMAT)
    version = DeltaTable(ledger.uri).version()
    monkeypatch.setattr(ledger_module, "LEDGER_FORMAT", LEDGER_FORMAT - 1)

    for read in (lambda: ledger.entries("b1"), lambda: ledger.latest("b1"), lambda: ledger.append([entry])):
        _refusal(read, f"the ledger {ledger.uri}", LEDGER_FORMAT, LEDGER_FORMAT - 1)
    assert DeltaTable(ledger.uri).version() == version


def test_a_release_log_in_a_newer_format_is_refused_neither_read_nor_appended_to(tmp_path, monkeypatch):
    lake = str(tmp_path)
    begin_release(lake, "publish", "b1", [f"{lake}/orders"])
    log = release_log_uri(lake)
    assert DeltaTable(log).metadata().configuration[TABLE_FORMAT_PROPERTY] == str(RELEASE_LOG_FORMAT)
    version = DeltaTable(log).version()
    monkeypatch.setattr(release_log, "RELEASE_LOG_FORMAT", RELEASE_LOG_FORMAT - 1)

    for read in (
        lambda: releases(lake),
        lambda: pinned_versions(lake, ["orders"]),
        lambda: read_log(lake),
        lambda: append_release(lake, "publish", "b1", {f"{lake}/orders": 0}),
    ):
        _refusal(read, f"the release log {log}", RELEASE_LOG_FORMAT, RELEASE_LOG_FORMAT - 1)
    assert DeltaTable(log).version() == version


def test_a_staging_manifest_in_a_newer_format_is_refused_by_a_publish_and_a_vacuum(tmp_path, monkeypatch):
    uri = str(tmp_path / "orders")
    incoming = tmp_path / "orders" / "_backfills" / "b1" / "incoming" / "w1"
    incoming.mkdir(parents=True)
    write = StagedWrite(uri, str(incoming), pa.schema([("x", pa.int64()), ("ds", pa.string())]), ("ds",), ())
    record_staging(write, "b1", [("2024-01-01",)], {"run_id": "r1"}, None)
    (manifest,) = (tmp_path / "orders" / "_backfills" / "b1" / "manifest").glob("*.json")
    assert json.loads(manifest.read_text())["format"] == MANIFEST_FORMAT
    monkeypatch.setattr(backfill_staging, "MANIFEST_FORMAT", MANIFEST_FORMAT - 1)

    what = f"the staging manifest {manifest}"
    for read in (lambda: read_staged(uri, "b1", None), lambda: listed_layout_paths(uri)):
        _refusal(read, what, MANIFEST_FORMAT, MANIFEST_FORMAT - 1)


def test_a_staging_fingerprint_in_a_newer_format_is_refused(monkeypatch):
    saved = StagingFingerprint("content", "times").to_json()
    assert saved["format"] == FINGERPRINT_FORMAT
    monkeypatch.setattr(backfill_staging, "FINGERPRINT_FORMAT", FINGERPRINT_FORMAT - 1)

    what = "the gate's fingerprint of orders"
    _refusal(lambda: StagingFingerprint.from_json(saved, what), what, FINGERPRINT_FORMAT, FINGERPRINT_FORMAT - 1)


def test_a_stored_plan_in_a_newer_format_is_refused():
    """Stored plans carried format 1 from the start: a newer one stands in for a newer release's."""
    newer = {"format": STORED_PLAN_FORMAT + 1, "assets": "reshaped"}
    what = "the stored plan of backfill b1"
    _refusal(lambda: graph_from("b1", newer, None), what, STORED_PLAN_FORMAT + 1, STORED_PLAN_FORMAT)  # type: ignore[arg-type]


def test_a_spark_server_s_files_in_a_newer_format_are_refused_never_taken_for_none(tmp_path, monkeypatch):
    """An older release meeting the files of a server a newer one started here neither takes it for
    no server (and starts another on its port) nor stops it: it refuses, the files kept."""
    server = LocalConnectServer(port=15002, state_dir=tmp_path)
    server.record_server(ProcessIdentity("another-host", 4242))
    server.record_identity("token")
    assert json.loads(server.pid_path.read_text())["format"] == SPARK_PID_FORMAT
    assert json.loads(server.identity_path.read_text())["format"] == SPARK_IDENTITY_FORMAT
    before = _files(tmp_path)

    monkeypatch.setattr(connect_server, "SPARK_PID_FORMAT", SPARK_PID_FORMAT - 1)
    what = f"the pid file {server.pid_path} of a Spark server"
    for read in (server.recorded_server, server.stop):
        _refusal(read, what, SPARK_PID_FORMAT, SPARK_PID_FORMAT - 1)
    monkeypatch.setattr(connect_server, "SPARK_PID_FORMAT", SPARK_PID_FORMAT)
    monkeypatch.setattr(connect_server, "SPARK_IDENTITY_FORMAT", SPARK_IDENTITY_FORMAT - 1)
    what = f"the identity {server.identity_path} of a Spark server"
    _refusal(server.foreign_server, what, SPARK_IDENTITY_FORMAT, SPARK_IDENTITY_FORMAT - 1)
    assert _files(tmp_path) == before


def test_a_deploy_record_in_a_newer_format_is_refused(tmp_path, monkeypatch):
    sha = "a" * 40
    folder = tmp_path / DEPLOYS_DIR
    folder.mkdir()
    deployment = Deployment(sha, "defs@aaaaaaaaaaaa", "defs", 40123, 4242, "worktree", "workspace.yaml", "log")
    save_deployment(tmp_path, deployment)
    record = folder / f"{sha[:12]}.json"
    assert json.loads(record.read_text())["format"] == DEPLOY_RECORD_FORMAT
    before = _files(folder)
    monkeypatch.setattr(deployments_module, "DEPLOY_RECORD_FORMAT", DEPLOY_RECORD_FORMAT - 1)

    what = f"the deploy record {record}"
    for read in (lambda: load_deployment(record), lambda: deployments(tmp_path)):
        _refusal(read, what, DEPLOY_RECORD_FORMAT, DEPLOY_RECORD_FORMAT - 1)
    assert _files(folder) == before


# Each versioned kind, and the test in which a newer one is refused (another file's by its node id).
REFUSED_IN = {
    "backfill record": test_a_record_in_a_newer_format_is_refused_naming_the_version_and_nothing_is_written,
    "coordinator announcement": test_an_announcement_in_a_newer_format_is_refused_never_taken_for_no_coordinator,
    "lease": test_a_lease_in_a_newer_format_is_refused_never_taken_for_no_lease,
    "ledger": test_a_ledger_in_a_newer_format_is_refused_neither_read_nor_appended_to,
    "release log": test_a_release_log_in_a_newer_format_is_refused_neither_read_nor_appended_to,
    "staging manifest": test_a_staging_manifest_in_a_newer_format_is_refused_by_a_publish_and_a_vacuum,
    "staging fingerprint": test_a_staging_fingerprint_in_a_newer_format_is_refused,
    "stored plan": test_a_stored_plan_in_a_newer_format_is_refused,
    "provenance index": "integration/test_provenance_index.py::"
    "test_an_index_of_a_newer_format_is_refused_naming_its_version_then_rebuilt_on_demand",
    "backfill tables": "unit/test_status.py::test_tables_of_a_newer_schema_are_refused",
    "spark server pid file": test_a_spark_server_s_files_in_a_newer_format_are_refused_never_taken_for_none,
    "spark server identity": test_a_spark_server_s_files_in_a_newer_format_are_refused_never_taken_for_none,
    "deploy record": test_a_deploy_record_in_a_newer_format_is_refused,
}

# Every module that writes state another process reads (possibly of another release), with the
# versioned kinds it writes (state_formats.VERSIONED_STATE); or why what it writes carries no format.
STATE_WRITERS = {
    "backfill/state/store.py": {"backfill record", "stored plan", "backfill tables"},  # a record's body holds its plan
    "backfill/state/presence.py": {"coordinator announcement"},
    "storage/leases.py": {"lease"},
    "backfill/state/ledger.py": {"ledger"},
    "storage/release_log.py": {"release log"},
    "storage/backfill_staging.py": {"staging manifest", "staging fingerprint"},
    "dagster_instance/provenance_index.py": {"provenance index"},
    # Also Spark's properties and allocation files, and the workspace.yaml Dagster reads, in their formats.
    "spark/connect_server.py": {"spark server pid file", "spark server identity"},
    "deploy/deployments.py": {"deploy record"},
}
UNVERSIONED_WRITERS = {
    "storage/delta/append.py": "appends the rows of its callers' tables (the ledger, the release log)",
    "dagster_instance/key_values.py": "the compare-and-set its callers write through",
    "backfill/publishing/freeze.py": "a JSON list of names per key: a change of shape takes a new key",
    "dagster_instance/lease_proof.py": "one text per key, a run's identity: a change takes a new key",
    "backfill/running/node_run_proofs.py": "a backfill's secret, one text: a change takes a new key",
    "backfill/commands/launching.py": "a note shown once per instance: any value means shown",
    "backfill/publishing/event_batches.py": "Dagster's own event log, in Dagster's format",
    "dagster_instance/storage.py": "Dagster's run databases, copies of an empty one Dagster's own schema built",
    "storage/delta/commit.py": "the tables' data, in the Delta protocol",
    "storage/delta/rollback.py": "the tables' data, in the Delta protocol",
    "storage/parquet_table.py": "a Parquet table's data and schema file, read as Parquet",
    "cli/backfill.py": "a heatmap page the user asked for: no process reads it",
    "spark/scheduler_pools.py": "the allocation file of the Spark server this process starts",
    "processes/command_server.py": "a client of another release is refused (its import path or modules differ)",
}
# What writes state: the instance's key-value store and tables, files, Delta commits.
_WRITES = re.compile(
    r"set_cursor_values|\bswap\(|insert_absent\(|open_output_stream\(|append_rows\(|write_deltalake\(|"
    r"write_text\(|write_bytes\(|\.insert\(\)|create_write_transaction|on_conflict_do|open\([^)]*['\"]w"
)
PACKAGE = Path(partition_assets.__file__).parent


def test_every_kind_of_state_another_process_reads_carries_a_format():
    """A new kind of state, or a new module writing one, fails here until it is versioned
    (state_formats.py) with a test refusing a newer one, or said to need no format."""
    writers = {str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py") if _WRITES.search(path.read_text())}
    assert writers == set(STATE_WRITERS) | set(UNVERSIONED_WRITERS)
    assert set().union(*STATE_WRITERS.values()) == set(VERSIONED_STATE) == set(REFUSED_IN)
    for module in STATE_WRITERS:
        assert "from partition_assets.state_formats import" in (PACKAGE / module).read_text(), module
    tests = Path(__file__).parents[1]
    for kind, test in REFUSED_IN.items():
        if isinstance(test, str):
            path, name = test.split("::")
            assert f"def {name}(" in (tests / path).read_text(), kind
    assert all(version >= 1 for version in VERSIONED_STATE.values())
