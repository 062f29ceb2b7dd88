"""`backfill retract` (issue 41, point 6): partitions removed from their Delta tables as a staged
backfill rewrites them (staged removals, gate, one commit per table, ledger rows) and marked
not materialized in the instance; `backfill rollback` brings back rows and materializations;
and the bad inputs, each refused writing nothing.

One module-scoped lake and instance: support/locations/retract_defs.py's `events` and `daily_counts`
materialized for seven of their ten days by one range run, through the commands layer; the
command line once, as a process, against the same instance (a DAGSTER_HOME)."""

import os
import re
import shutil
import signal
from pathlib import Path

import dagster as dg
import pytest
import yaml
from deltalake import DeltaTable

from partition_assets.automation import sparse_backfill_job
from partition_assets.backfill.commands import (
    SilentConsole,
    approve_backfill,
    backfill_status,
    discard_backfill,
    list_backfills,
    resume_backfill,
    retract_partitions,
    rollback_backfill,
)
from partition_assets.backfill.model import BackfillStatus
from partition_assets.backfill.planning.instance_state import current_nodes, graph_of
from partition_assets.backfill.planning.run_config import spec_run_config
from partition_assets.backfill.planning.spec import BackfillSpec
from partition_assets.backfill.publishing.tables import lake_root
from partition_assets.backfill.state.ledger import Ledger, LedgerStatus, ledger_uri
from partition_assets.backfill.state.record import BackfillRecord
from partition_assets.backfill.state.store import BackfillStore
from partition_assets.code_location import load_definitions
from partition_assets.errors import (
    ApprovalError,
    BackfillPlanError,
    DownstreamReadersError,
    NotMaterializedError,
)
from partition_assets.run_tags import BACKFILL_ID_TAG, TAKEOVER_TAG
from partition_assets.storage.failpoints import ENV as FAILPOINT_ENV
from partition_assets.storage.failpoints import InjectedFailure
from partition_assets.storage.leases import held_by
from partition_assets_tests.support import REPO
from partition_assets_tests.support.cli_runs import run_cli
from partition_assets_tests.support.instances import add_to_config
from partition_assets_tests.support.locations import retract_defs
from partition_assets_tests.support.results import failure_message

MATERIALIZED = [f"2024-01-0{day}" for day in range(1, 8)]  # 2024-01-08 to 10 never are
RETRACTED = ["2024-01-02", "2024-01-03", "2024-01-05"]
TABLES = ("events", "daily_counts")


@pytest.fixture(scope="module")
def retract_lake(spark_resource, home_template, tmp_path_factory):
    """(code location file, instance, lake, DAGSTER_HOME of the instance): both tables
    materialized for MATERIALIZED in one run."""
    root = tmp_path_factory.mktemp("retract")
    lake = root / "lake"
    source = (REPO / "partition_assets_tests" / "support" / "locations" / "retract_defs.py").read_text()
    location = root / "retract_defs.py"
    location.write_text(source.replace('os.environ.get(LAKE_ENV, ".lake-retract-tests")', repr(str(lake))))
    assert repr(str(lake)) in location.read_text()
    home = root / "dagster_home"
    shutil.copytree(home_template, home)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        defs = load_definitions(str(location))
        result = defs.resolve_implicit_global_asset_job_def().execute_in_process(
            instance=instance,
            tags={
                "dagster/asset_partition_range_start": MATERIALIZED[0],
                "dagster/asset_partition_range_end": MATERIALIZED[-1],
            },
        )
        assert result.success
        yield str(location), instance, lake, home


def spec(location: str, selection: str = "events", **fields) -> BackfillSpec:
    return BackfillSpec(module=location, selection=selection, **fields)


def days_of(lake: Path, table: str) -> dict[str, int]:
    """Rows per day of a table, as a reader outside Spark sees it."""
    frame = DeltaTable(str(lake / table)).to_pandas()
    return frame.groupby("ds").size().to_dict()


def materialized(instance: dg.DagsterInstance, table: str) -> set[str]:
    return instance.get_materialized_partitions(dg.AssetKey(table))


def test_bad_inputs_are_refused_naming_the_fix_and_writing_nothing(retract_lake):
    location, instance, lake, _ = retract_lake
    versions = {table: DeltaTable(str(lake / table)).version() for table in TABLES}
    recorded = len(list_backfills(instance).standings)

    with pytest.raises(DownstreamReadersError) as refused:  # daily_counts 2024-01-02 reads it
        retract_partitions(spec(location, keys=["2024-01-02"]), instance)
    assert "daily_counts 2024-01-02" in str(refused.value) and "--downstream" in str(refused.value)
    with pytest.raises(NotMaterializedError, match="events 2024-01-08"):
        retract_partitions(spec(location, keys=["2024-01-07", "2024-01-08"], downstream=True), instance)
    with pytest.raises(BackfillPlanError, match="2025-01-01"):  # no partition of the asset
        retract_partitions(spec(location, keys=["2025-01-01"], downstream=True), instance)
    with pytest.raises(BackfillPlanError, match="no_such_asset"):
        retract_partitions(spec(location, selection="no_such_asset", keys=["2024-01-02"]), instance)
    with pytest.raises(BackfillPlanError, match="selection is empty"):
        retract_partitions(spec(location, selection=" ", keys=["2024-01-02"]), instance)

    assert {table: DeltaTable(str(lake / table)).version() for table in TABLES} == versions
    assert all(materialized(instance, table) == set(MATERIALIZED) for table in TABLES)
    assert len(list_backfills(instance).standings) == recorded


def test_retract_with_downstream_removes_the_partitions_in_one_commit_per_table_and_rollback_restores(
    retract_lake,
):
    location, instance, lake, _ = retract_lake
    before = {table: (DeltaTable(str(lake / table)).version(), days_of(lake, table)) for table in TABLES}

    retracted = retract_partitions(spec(location, keys=RETRACTED, downstream=True), instance)

    kept = sorted(set(MATERIALIZED) - set(RETRACTED))
    for table in TABLES:
        version, days = before[table]
        assert DeltaTable(str(lake / table)).version() == version + 1  # one commit
        assert sorted(days_of(lake, table)) == kept
        assert days_of(lake, table) == {day: days[day] for day in kept}
        assert materialized(instance, table) == set(kept)
    assert retracted.versions == {table: before[table][0] + 1 for table in TABLES}
    # Rows going to zero are announced, per partition, and in the ledger.
    assert [(p.asset, p.partition, p.rows) for p in retracted.removed] == [
        *[("events", day, retract_defs.ROWS_PER_DAY) for day in RETRACTED],
        *[("daily_counts", day, 1) for day in RETRACTED],
    ]
    assert "removed events 2024-01-02: 3 rows -> 0" in retracted.lines
    failed = {(check.partition, check.rule, check.new) for check in retracted.gate_checks if not check.passed}
    assert failed == {((day,), "rows", 0) for day in RETRACTED}  # events' gate: 3 rows -> 0
    ledger = Ledger(ledger_uri(lake_root(load_definitions(location))))
    rows = ledger.latest(retracted.backfill_id)
    assert {(row.asset, row.partition, row.rows, row.status) for row in rows} == {
        (table, day, 0, LedgerStatus.PUBLISHED) for table in TABLES for day in RETRACTED
    }
    assert [[check["passed"] for check in row.gate] for row in rows if row.asset == "events"] == [[False]] * 3
    assert graph_nodes_current(location, instance) == set(kept)  # --catch-up would run them again
    status = backfill_status(instance, retracted.backfill_id)  # no node runs: it says what it removed
    assert "retract of" in status.title
    assert status.retracted_lines == [f"retracted: {table} {', '.join(RETRACTED)}" for table in TABLES]

    restored = rollback_backfill(instance, retracted.backfill_id)

    for table in TABLES:
        version, days = before[table]
        assert restored.versions[table] == version + 2
        assert days_of(lake, table) == days
        assert materialized(instance, table) == set(MATERIALIZED)


def test_the_command_line_prints_each_removed_partition_and_how_to_bring_them_back(retract_lake):
    location, instance, lake, home = retract_lake
    args = ("backfill", "retract", "-f", location, "--select", "events", "--keys", "2024-01-07", "--downstream")

    done = run_cli(*args, env={**os.environ, "DAGSTER_HOME": str(home)})

    assert done.returncode == 0, done.stderr
    assert "removed events 2024-01-07: 3 rows -> 0" in done.stdout
    assert "removed daily_counts 2024-01-07: 1 rows -> 0" in done.stdout
    assert "events 2024-01-07 rows: 3 -> 0 (limit ±1.5) FAILED" in done.stdout  # the gate announces it
    [backfill_id] = re.findall(r"backfill (\w+) retracted 2 partitions", done.stdout)
    assert f"partition-assets backfill rollback {backfill_id}" in done.stdout
    assert "2024-01-07" not in days_of(lake, "events") and "2024-01-07" not in materialized(instance, "events")
    rollback_backfill(instance, backfill_id)  # the module's lake as the other tests expect it
    assert all(materialized(instance, table) == set(MATERIALIZED) for table in TABLES)


def stopped_retract(retract_lake, monkeypatch, keys: list[str]) -> BackfillRecord:
    """The record of a retract of `keys` (with downstream) stopped by an unexpected error after
    staging its removals, before its gate: `running`, its tables unchanged, its partitions
    leased (parked) until it is resumed or discarded."""
    location, instance, lake, _ = retract_lake
    monkeypatch.setenv(FAILPOINT_ENV, "gating:raise")
    with pytest.raises(InjectedFailure):
        retract_partitions(spec(location, keys=keys, downstream=True), instance)
    monkeypatch.delenv(FAILPOINT_ENV)
    [stopped] = [
        standing.record
        for standing in list_backfills(instance).standings
        if standing.record.retracted and standing.record.status == BackfillStatus.RUNNING
    ]
    leases = [lease for table in TABLES for lease in held_by(str(lake / table), stopped.id)]
    assert len(leases) == len(TABLES) and all(lease.parked for lease in leases)
    return stopped


def node_runs(instance: dg.DagsterInstance, backfill_id: str) -> list[dg.DagsterRun]:
    """The runs tagged with the backfill's id that computed an asset (none for a retract)."""
    return [run for run in instance.get_runs(dg.RunsFilter(tags={BACKFILL_ID_TAG: backfill_id})) if run.asset_selection]


def test_a_retract_stopped_before_its_publish_is_resumed_as_a_retract_or_discarded(retract_lake, monkeypatch):
    location, instance, lake, _ = retract_lake
    versions = {table: DeltaTable(str(lake / table)).version() for table in TABLES}
    stopped = stopped_retract(retract_lake, monkeypatch, ["2024-01-06"])

    resumed = resume_backfill(instance, stopped.id, SilentConsole())

    assert resumed.succeeded and f"backfill {stopped.id} retracted 2 partitions" in resumed.message
    assert BackfillStore(instance).status(stopped.id) == BackfillStatus.PUBLISHED
    assert not node_runs(instance, stopped.id)  # nothing computed: its partitions are removed
    for table in TABLES:
        assert "2024-01-06" not in days_of(lake, table) and "2024-01-06" not in materialized(instance, table)
    rollback_backfill(instance, stopped.id)

    again = stopped_retract(retract_lake, monkeypatch, ["2024-01-06"])
    discard_backfill(instance, again.id)  # or dropped: its staged removals deleted
    assert {table: DeltaTable(str(lake / table)).version() for table in TABLES} == {
        table: version + 2
        for table, version in versions.items()  # the retract and its rollback
    }
    assert all(days_of(lake, table) == days_of_materialized(table) for table in TABLES)
    assert all(materialized(instance, table) == set(MATERIALIZED) for table in TABLES)
    assert not any((lake / table / "_backfills" / again.id).exists() for table in TABLES)


def days_of_materialized(table: str) -> dict[str, int]:
    """Rows per day of `table` as the module's fixture materialized it."""
    return {day: retract_defs.ROWS_PER_DAY if table == "events" else 1 for day in MATERIALIZED}


def test_a_retract_taken_over_by_a_tagged_coordinator_run_stays_a_retract(retract_lake, monkeypatch):
    """Issue 50, hole 3: a coordinator run of the engine job tagged with a stopped retract's id and
    the takeover tag (what the takeover sensor requests, or anyone types in the Launchpad) ran it
    as a compute backfill: the removed partitions were computed again and published."""
    location, instance, lake, _ = retract_lake
    stopped = stopped_retract(retract_lake, monkeypatch, ["2024-01-06"])
    job = sparse_backfill_job(location)
    takeover = {BACKFILL_ID_TAG: stopped.id, TAKEOVER_TAG: "true"}

    taken_over = job.execute_in_process(
        run_config=spec_run_config(stopped.spec), instance=instance, tags=takeover, raise_on_error=False
    )

    assert taken_over.success
    assert BackfillStore(instance).status(stopped.id) == BackfillStatus.PUBLISHED
    assert not node_runs(instance, stopped.id)  # no partition computed again
    for table in TABLES:
        assert "2024-01-06" not in days_of(lake, table) and "2024-01-06" not in materialized(instance, table)
    versions = {table: DeltaTable(str(lake / table)).version() for table in TABLES}
    # The same tags typed again for the now final retract: the run does nothing.
    again = job.execute_in_process(
        run_config=spec_run_config(stopped.spec), instance=instance, tags=takeover, raise_on_error=False
    )
    assert again.success and {table: DeltaTable(str(lake / table)).version() for table in TABLES} == versions
    assert BackfillStore(instance).status(stopped.id) == BackfillStatus.PUBLISHED and not node_runs(
        instance, stopped.id
    )
    rollback_backfill(instance, stopped.id)
    assert all(materialized(instance, table) == set(MATERIALIZED) for table in TABLES)


def test_a_retract_killed_between_its_commits_and_its_wipe_is_resumed_and_wipes(retract_lake):
    """Issue 50, hole 7: a retract killed after its commits and before Dagster's partitions were
    wiped said `published` while Dagster showed its partitions materialized, and resume refused it."""
    location, instance, lake, home = retract_lake
    args = ("backfill", "retract", "-f", location, "--select", "events", "--keys", "2024-01-06", "--downstream")

    earlier = {standing.record.id for standing in list_backfills(instance).standings}

    killed = run_cli(*args, env={**os.environ, "DAGSTER_HOME": str(home), FAILPOINT_ENV: "retract_wiping"})

    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    [record] = [standing.record for standing in list_backfills(instance).standings if standing.record.id not in earlier]
    assert record.status == BackfillStatus.PUBLISHING  # not published: its wipe is still to come
    assert all("2024-01-06" not in days_of(lake, table) for table in TABLES)  # its commits are in
    assert all("2024-01-06" in materialized(instance, table) for table in TABLES)  # its wipe is not

    resumed = resume_backfill(instance, record.id, SilentConsole())

    assert resumed.succeeded, resumed.message
    assert BackfillStore(instance).status(record.id) == BackfillStatus.PUBLISHED
    for table in TABLES:
        assert "2024-01-06" not in days_of(lake, table) and "2024-01-06" not in materialized(instance, table)
    assert graph_nodes_current(location, instance) == set(MATERIALIZED) - {"2024-01-06"}  # --catch-up runs it
    rollback_backfill(instance, record.id)
    assert all(materialized(instance, table) == set(MATERIALIZED) for table in TABLES)


def graph_nodes_current(location: str, instance: dg.DagsterInstance) -> set[str]:
    """The days `--catch-up` over every asset of the module's range would leave alone."""
    graph = graph_of(spec(location, selection="*", start=MATERIALIZED[0], end=MATERIALIZED[-1]), instance)
    return {node.partition for node in current_nodes(graph, instance)}


def test_under_a_required_approval_a_retract_and_a_rollback_wait_for_an_approver(retract_lake):
    """Issue 50, hole 4: with `approval: {required: true, approvers: [...]}`, ana's retract removed
    the partitions at once, and `rollback` ran ungated."""
    location, _, lake, home = retract_lake
    config = (home / "dagster.yaml").read_text()
    settings = yaml.safe_load(config)["partition_assets"]
    add_to_config(home, partition_assets={**settings, "approval": {"required": True, "approvers": ["ana", "bruno"]}})
    try:
        with dg.DagsterInstance.from_config(str(home)) as instance:
            before = {table: days_of(lake, table) for table in TABLES}

            waiting = retract_partitions(spec(location, keys=["2024-01-06"], downstream=True), instance, "ana")

            assert BackfillStore(instance).status(waiting.backfill_id) == BackfillStatus.AWAITING_APPROVAL
            assert {table: days_of(lake, table) for table in TABLES} == before  # nothing removed yet
            assert waiting.awaiting_approval and not waiting.versions
            assert "to remove events 2024-01-06: 3 rows -> 0" in waiting.lines
            assert f"backfill approve {waiting.backfill_id} --by NAME" in waiting.message
            assert all(materialized(instance, table) == set(MATERIALIZED) for table in TABLES)
            # A takeover typed by hand for it is refused, naming approve; it stays as it was.
            takeover = sparse_backfill_job(location).execute_in_process(
                run_config=spec_run_config(BackfillStore(instance).load(waiting.backfill_id).spec),
                instance=instance,
                tags={BACKFILL_ID_TAG: waiting.backfill_id, TAKEOVER_TAG: "true"},
                raise_on_error=False,
            )
            assert not takeover.success
            assert "is awaiting_approval: cannot resume it" in failure_message(takeover)
            assert BackfillStore(instance).status(waiting.backfill_id) == BackfillStatus.AWAITING_APPROVAL
            assert {table: days_of(lake, table) for table in TABLES} == before
            with pytest.raises(ApprovalError, match="the approver 'ana' launched backfill"):
                approve_backfill(instance, waiting.backfill_id, "ana")
            with pytest.raises(ApprovalError, match="allows only ana, bruno"):
                approve_backfill(instance, waiting.backfill_id, "carol")

            approve_backfill(instance, waiting.backfill_id, "bruno")

            for table in TABLES:
                assert "2024-01-06" not in days_of(lake, table) and "2024-01-06" not in materialized(instance, table)
            removed = {table: days_of(lake, table) for table in TABLES}

            asked = rollback_backfill(instance, waiting.backfill_id, requested_by="bruno")

            assert "rollback is awaiting approval" in asked.message
            assert BackfillStore(instance).status(waiting.backfill_id) == BackfillStatus.ROLLBACK_AWAITING_APPROVAL
            assert {table: days_of(lake, table) for table in TABLES} == removed
            with pytest.raises(ApprovalError, match="the approver 'bruno' asked for the rollback of backfill"):
                approve_backfill(instance, waiting.backfill_id, "bruno")

            rolled_back = approve_backfill(instance, waiting.backfill_id, "ana")

            assert "approved by ana and rolled back" in rolled_back.message
            assert BackfillStore(instance).status(waiting.backfill_id) == BackfillStatus.ROLLED_BACK
            assert {table: days_of(lake, table) for table in TABLES} == before
            assert all(materialized(instance, table) == set(MATERIALIZED) for table in TABLES)
    finally:
        (home / "dagster.yaml").write_text(config)
