"""`backfill extend` (backfill/commands/extending.py) widens a stopped backfill's time range: on a
failed one, on a paused one whose coordinator died and on one awaiting approval, the new nodes join its stored plan and
run on `resume`, the nodes it had done never run again, and one publish covers the whole range;
it is refused, nothing written, on a published or running backfill, for a range that shrinks,
and where another backfill holds a lease on the new partitions.

The backfills run through the command line (a real coordinator, workers and instance, on a
location that needs no Spark: support/locations/extend_defs.py); `extend` runs in this process."""

import os
import signal
from pathlib import Path

import dagster as dg
import pytest

from partition_assets.backfill.commands import extend_backfill, pause_backfill
from partition_assets.backfill.model import BackfillStatus, Node
from partition_assets.backfill.planning.instance_state import graph_of
from partition_assets.backfill.planning.spec import BackfillSpec
from partition_assets.backfill.publishing.dagster_events import PUBLISH_RUN_TAG
from partition_assets.backfill.publishing.freeze import frozen_assets
from partition_assets.backfill.publishing.tables import tables_of
from partition_assets.backfill.state.record import BackfillRecord, by_asset, skipped_as_current
from partition_assets.backfill.state.store import BackfillStore
from partition_assets.backfill.state.stored_plan import recorded_graph
from partition_assets.code_location import load_definitions
from partition_assets.errors import CoordinatorLiveError, ExtendError, IllegalTransitionError, PartitionLeasedError
from partition_assets.run_tags import BACKFILL_ID_TAG
from partition_assets.storage.leases import acquire, held_by, release
from partition_assets_tests.support.cli_runs import backfill_cli, backfill_id, runs_by_node, start_cli
from partition_assets_tests.support.locations import extend_defs
from partition_assets_tests.support.polling import wait_for
from partition_assets_tests.support.records import backfill_store, record_at, recorded_ids, version_of

CODE_LOCATION = extend_defs.__name__
SELECTION = "key:source or key:report"
S = BackfillStatus
SUCCESS = dg.DagsterRunStatus.SUCCESS


def days(first: int, last: int) -> list[str]:
    return [f"2024-01-{day:02d}" for day in range(first, last + 1)]


def nodes(*day_lists: list[str]) -> set[tuple[str, str]]:
    return {(asset, day) for day_list in day_lists for day in day_list for asset in ("source", "report")}


def run_cli_backfill(home: Path, first: str, last: str, *options: str) -> str:
    """A backfill of `source` and `report` from `first` to `last` run by the command line with
    `options`, however it ends; its id."""
    result = backfill_cli(
        home, "run", "-m", CODE_LOCATION, "--select", SELECTION, "--start", first, "--end", last, *options
    )
    return backfill_id(result.stdout + result.stderr)


def published_nodes(home: Path, backfill: str) -> list[tuple[str, str]]:
    """The (asset, partition) of each materialization the backfill's publish runs recorded."""
    with dg.DagsterInstance.from_config(str(home)) as instance:
        found = []
        for run in instance.get_runs(dg.RunsFilter(tags={BACKFILL_ID_TAG: backfill, PUBLISH_RUN_TAG: "true"})):
            for record in instance.get_records_for_run(
                run.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION
            ).records:
                materialization = record.asset_materialization
                assert materialization is not None
                found.append((materialization.asset_key.to_user_string(), materialization.partition))
        return found


def resume_and_check(home: Path, backfill: str, done_before: set[tuple[str, str]], all_nodes: set) -> None:
    """Resumes the extended backfill by the command line: every node not done before runs to
    success, those done before never run again, and one publish covers all the nodes."""
    resumed = backfill_cli(home, "resume", backfill)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    if "awaiting approval" in resumed.stdout:  # its gate judged the whole range: it waits again
        approved = backfill_cli(home, "approve", backfill, "--by", "bob")
        assert approved.returncode == 0, approved.stdout + approved.stderr
    runs = runs_by_node(home, backfill)
    runs = {node: statuses for node, statuses in runs.items() if node[0] in ("source", "report")}
    assert set(runs) == all_nodes
    for node in done_before:  # its one run: the first one
        assert runs[node] == [SUCCESS], node
    for node in all_nodes - done_before:
        assert runs[node][0] == SUCCESS, node  # newest first
    published = published_nodes(home, backfill)
    assert sorted(published) == sorted(all_nodes)  # one publish, each node once
    with backfill_store(home) as store:
        assert store.status(backfill) == S.PUBLISHED


def test_extend_a_failed_backfill_runs_the_new_nodes_and_publishes_the_whole_range_once(home):
    (home / extend_defs.FAILING_DAYS).write_text("2024-01-02\n")
    backfill = run_cli_backfill(home, "2024-01-01", "2024-01-03")
    done_before = {node for node, statuses in runs_by_node(home, backfill).items() if SUCCESS in statuses}
    assert done_before == nodes(["2024-01-01", "2024-01-03"])
    (home / extend_defs.FAILING_DAYS).unlink()
    with dg.DagsterInstance.from_config(str(home)) as instance:
        store = BackfillStore(instance)
        assert store.status(backfill) == S.FAILED
        version = version_of(store, backfill)
        with pytest.raises(ExtendError, match="would shrink it"):
            extend_backfill(instance, backfill, end="2024-01-02")
        with pytest.raises(ExtendError, match="covers 2024-01-01..2024-01-03 already"):
            extend_backfill(instance, backfill, end="2024-01-03")
        assert version_of(store, backfill) == version  # nothing written
        extended = extend_backfill(instance, backfill, end="2024-01-05")
        assert (extended.added, extended.nodes, extended.pending, extended.status) == (4, 10, 6, S.FAILED)
        assert store.load(backfill).spec.end == "2024-01-05"
    resume_and_check(home, backfill, done_before, nodes(days(1, 5)))
    with dg.DagsterInstance.from_config(str(home)) as instance:
        with pytest.raises(IllegalTransitionError, match="is published: cannot extend it"):
            extend_backfill(instance, backfill, end="2024-01-06")


def test_extend_a_paused_backfill_whose_coordinator_died(home):
    """Paused while a run of 2024-01-02 is in flight (every run of 2024-01-02 and 03 waits), its
    coordinator killed with its workers: the nodes it finished stay done, the rest run on resume."""
    (home / extend_defs.HELD_DAYS).write_text("2024-01-02\n2024-01-03\n")
    coordinator = start_cli(
        "backfill", "run", "-m", CODE_LOCATION, "--select", SELECTION,
        "--start", "2024-01-01", "--end", "2024-01-03", "--max-parallel", "1",
    )  # fmt: skip
    try:
        wait_for(lambda: recorded_ids(home), 120, alive=[coordinator])
        (backfill,) = recorded_ids(home)
        wait_for(lambda: ("source", "2024-01-02") in runs_by_node(home, backfill), 120, alive=[coordinator])
        with dg.DagsterInstance.from_config(str(home)) as instance:
            pause_backfill(instance, backfill)
            with pytest.raises(CoordinatorLiveError, match="has a live coordinator"):  # it runs the plan it has
                extend_backfill(instance, backfill, end="2024-01-04")
    finally:
        os.killpg(coordinator.pid, signal.SIGKILL)
        coordinator.wait()
    (home / extend_defs.HELD_DAYS).unlink()
    done_before = {node for node, statuses in runs_by_node(home, backfill).items() if SUCCESS in statuses}
    assert ("source", "2024-01-01") in done_before and not done_before & nodes(days(2, 3))
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert BackfillStore(instance).status(backfill) == S.PAUSED
        extended = extend_backfill(instance, backfill, start="2024-01-01", end="2024-01-04")
        assert (extended.added, extended.pending, extended.status) == (2, 8 - len(done_before), S.PAUSED)
    resume_and_check(home, backfill, done_before, nodes(days(1, 4)))


def test_extend_is_refused_over_another_backfill_s_lease_on_a_running_backfill_and_on_a_retract(instance):
    spec = BackfillSpec(module=CODE_LOCATION, selection="key:stored_days", start="2024-01-01", end="2024-01-03")
    store = BackfillStore(instance)
    record_at(store, "stopped", S.FAILED, spec)
    recorded_graph(store.load("stopped"), instance)  # record_at stores no plan: it is planned and stored once
    other = BackfillSpec.from_json({**spec.to_json(), "start": "2024-01-05", "end": "2024-01-06"})
    [table] = tables_of(load_definitions(CODE_LOCATION), graph_of(other, instance)).values()
    lease = acquire(table.uri, "other-backfill", "backfill", table.scope)
    try:
        version = version_of(store, "stopped")
        with pytest.raises(PartitionLeasedError, match="backfill other-backfill holds a lease on partitions"):
            extend_backfill(instance, "stopped", end="2024-01-05")
        assert version_of(store, "stopped") == version and held_by(table.uri, "stopped") == []  # nothing written
        extended = extend_backfill(instance, "stopped", end="2024-01-04")  # next to the other's: no overlap
        assert extended.added == 1
        [parked] = held_by(table.uri, "stopped")
        assert parked.parked and len(parked.partitions or ()) == 4
        release(parked)
    finally:
        release(lease)
    record_at(store, "running", S.RUNNING, spec)
    with pytest.raises(IllegalTransitionError, match="pause a running one"):
        extend_backfill(instance, "running", end="2024-01-04")
    retract = BackfillRecord(
        spec, id="retract", store=store, status=S.FAILED, retracted={"stored_days": ["2024-01-01"]}
    )
    retract.save()
    with pytest.raises(ExtendError, match="is a retract: it removes partitions and is never extended"):
        extend_backfill(instance, "retract", end="2024-01-04")


def test_extend_a_backfill_awaiting_approval_waits_paused_and_is_approved_again_over_the_whole_range(home):
    backfill = run_cli_backfill(home, "2024-01-01", "2024-01-02", "--approval", "required")
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert BackfillStore(instance).status(backfill) == S.AWAITING_APPROVAL
        assert frozen_assets(instance)
        extended = extend_backfill(instance, backfill, end="2024-01-03")
        assert (extended.added, extended.pending, extended.status) == (2, 2, S.PAUSED)
        record = BackfillStore(instance).load(backfill)
        assert record.approval is None and record.gated_staging == {}  # its gate judges the whole range again
        assert not frozen_assets(instance)
    resume_and_check(home, backfill, nodes(days(1, 2)), nodes(days(1, 3)))


def test_extending_a_catch_up_backfill_stores_its_current_partitions_again_as_runs_of_the_new_plan(instance):
    """Extended at its start, its plan's indexes move: the partitions its --catch-up start left
    alone as current (listed, as a format-3 record keeps them) are stored again as runs of the
    new plan (backfill/state/skipped_ranges.py), the same partitions, and never run."""
    spec = BackfillSpec(module=CODE_LOCATION, selection=SELECTION, start="2024-01-03", end="2024-01-06", catch_up=True)
    store = BackfillStore(instance)
    record = record_at(store, "caught-up", S.FAILED, spec)
    current = {Node(dg.AssetKey(asset), day) for asset in ("source", "report") for day in days(3, 4) + days(6, 6)}
    record.skipped = by_asset(sorted(current))
    record.save()

    extended = extend_backfill(instance, "caught-up", start="2024-01-01", end="2024-01-07")

    record = store.load("caught-up")
    assert {asset: type(stored) for asset, stored in record.skipped.items()} == {"source": dict, "report": dict}
    assert set(skipped_as_current(record, recorded_graph(record, instance))) == current
    assert (extended.added, extended.nodes, extended.pending) == (6, 14, 14 - len(current))
