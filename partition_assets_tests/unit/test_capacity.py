"""Backfills never starve production (issue 24): the capacity core (backfill/running/capacity.py),
launch windows (launch_window.py), the scheduling core within an allowance, the launch gate
on a real instance's runs and pools (claims.py), and pause/unpause (backfill/state/pausing.py)."""

import threading
import uuid
from concurrent.futures import Future
from datetime import UTC, datetime, time

import dagster as dg
import pytest

from partition_assets.automation import pause_backfill_job, pause_run_config
from partition_assets.automation.pause_job import PAUSE_OP
from partition_assets.backfill.model import BackfillStatus
from partition_assets.backfill.planning.launch_window import LaunchWindow
from partition_assets.backfill.planning.spec import BackfillSpec
from partition_assets.backfill.publishing import lease_queue
from partition_assets.backfill.publishing.lease_queue import leases_when_free
from partition_assets.backfill.running import loop
from partition_assets.backfill.running.capacity import (
    STOPPED,
    UNLIMITED,
    Allowance,
    BackfillCapacity,
    Claimant,
    Load,
    allowance,
    backfill_cap,
    fewer_runs_reason,
    shares,
)
from partition_assets.backfill.running.claims import LaunchGate, asset_pools, capacity_of
from partition_assets.backfill.running.lineup import standings
from partition_assets.backfill.running.loop import execute
from partition_assets.backfill.running.node_run_proofs import NodeRunProofs
from partition_assets.backfill.running.scheduling import Schedule, Throttle
from partition_assets.backfill.state.pausing import pause, unpause
from partition_assets.backfill.state.store import BackfillStore
from partition_assets.errors import (
    BackfillPlanError,
    CapacityConfigError,
    IllegalTransitionError,
    LaunchWindowError,
    PartitionLeasedError,
)
from partition_assets.run_tags import BACKFILL_ID_TAG, DAGSTER_BACKFILL_TAG
from partition_assets.storage.leases import acquire, release
from partition_assets.storage.partition_scope import PartitionScope
from partition_assets_tests.support.polling import wait_for
from partition_assets_tests.support.records import SPEC, announce, record_at, version_of
from partition_assets_tests.unit.test_scheduling import graph_of, results

S = BackfillStatus
CAPACITY = BackfillCapacity(max_runs=4, max_runs_under_production=1)


def test_backfills_shrink_to_their_reserved_share_while_production_runs_and_grow_back_after():
    assert backfill_cap(CAPACITY, Load()) == 4
    assert backfill_cap(CAPACITY, Load(production_runs=2)) == 1
    assert backfill_cap(CAPACITY, Load(production_runs=0)) == 4
    # Under the instance's run queue limit, backfills leave the reserve and production's slots.
    assert backfill_cap(CAPACITY, Load(max_concurrent_runs=10)) == 4
    assert backfill_cap(BackfillCapacity(reserve_runs=2), Load(max_concurrent_runs=5, production_runs=2)) == 1
    assert backfill_cap(BackfillCapacity(), Load()) is None


def test_backfills_share_the_cap_by_priority_then_evenly_the_older_taking_the_odd_slot():
    old, new, urgent = Claimant("old", 0, 4), Claimant("new", 0, 4), Claimant("urgent", 5, 3)
    assert shares(5, [old, new]) == {"old": 3, "new": 2}
    assert shares(5, [old, new, urgent]) == {"urgent": 3, "old": 1, "new": 1}
    assert shares(2, [old, new, urgent]) == {"urgent": 2, "old": 0, "new": 0}
    # A backfill asking less leaves the rest to the others of its tier.
    assert shares(6, [Claimant("small", 0, 1), new]) == {"small": 1, "new": 4}
    assert shares(None, [old, urgent]) == {"old": 4, "urgent": 3}


def test_a_pool_keeps_its_last_slot_and_production_s_slots_from_backfills():
    capacity = BackfillCapacity(share_of_pools=0.5, pools={"warehouse": 3})
    load = Load(pool_limits={"spark": 8, "warehouse": 4, "tiny": 1}, production_pool_runs={"spark": 5})
    allowed = allowance(capacity, load, [Claimant("b", 0, 4)], "b", ["spark", "warehouse", "tiny", "free"])
    # spark: half of 8, but production holds 5 of its 8 slots and keeps one free; warehouse: its own cap (3 < 4);
    # tiny: its one slot is shared; free: no Dagster limit, no cap.
    assert allowed.pool_runs == {"spark": 2, "warehouse": 3, "tiny": 1}
    assert allowed.runs == 4
    # Other backfills' runs in a pool count against its cap.
    others = Load(pool_limits={"warehouse": 4}, other_backfill_pool_runs={"warehouse": 2})
    assert allowance(capacity, others, [Claimant("b", 0, 4)], "b", ["warehouse"]).pool_runs == {"warehouse": 1}


@pytest.mark.parametrize("share", [0, -0.1, 1.5, True, "half"])
def test_a_share_outside_0_1_is_refused_naming_the_value(share):
    with pytest.raises(CapacityConfigError, match=rf"share_of_pools is {share!r}.*\(0, 1\].*Nothing was launched"):
        BackfillCapacity.from_settings({"share_of_pools": share})


def test_bad_capacity_settings_are_refused_with_the_rule():
    assert BackfillCapacity.from_settings(None) == BackfillCapacity()
    assert BackfillCapacity.from_settings({"share_of_pools": 1}).share_of_pools == 1
    with pytest.raises(CapacityConfigError, match=r"unknown keys \['max_run'\]"):
        BackfillCapacity.from_settings({"max_run": 2})
    with pytest.raises(CapacityConfigError, match=r"max_runs is 0 .* >= 1"):
        BackfillCapacity.from_settings({"max_runs": 0})
    with pytest.raises(CapacityConfigError, match=r"pools\.spark is -1"):
        BackfillCapacity.from_settings({"pools": {"spark": -1}})
    with pytest.raises(CapacityConfigError, match=r"names \['sparkk'\].*its pools: \['spark'\]"):
        BackfillCapacity(pools={"sparkk": 1}).check_pools({"spark"})


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        ("20-06", "is not HH:MM-HH:MM"),
        ("20:00", "is not HH:MM-HH:MM"),
        ("25:00-06:00", "no time of day"),
        ("06:00-06:00", "opens when it closes"),
        ("20:00-06:00 Mars/Olympus", "time zone 'Mars/Olympus', which is unknown"),
    ],
)
def test_a_malformed_window_is_refused_and_nothing_is_recorded(instance, text, rule):
    with pytest.raises(LaunchWindowError, match=rule):
        BackfillSpec(module="m", selection="key:a", window=text)
    assert BackfillStore(instance).ids() == []


def test_a_window_carries_over_midnight_in_its_time_zone_and_says_when_it_next_opens():
    window = LaunchWindow.parse("20:00-06:00 Europe/Paris")
    assert (window.opens, window.closes, str(window)) == (time(20), time(6), "20:00-06:00 Europe/Paris")
    # Paris is UTC+1 in January.
    assert window.is_open(datetime(2024, 1, 10, 19, 0, tzinfo=UTC))  # 20:00 in Paris
    assert window.is_open(datetime(2024, 1, 11, 4, 59, tzinfo=UTC))  # 05:59 the next day
    assert not window.is_open(datetime(2024, 1, 11, 5, 0, tzinfo=UTC))  # 06:00: closed
    noon = datetime(2024, 1, 11, 11, 0, tzinfo=UTC)
    assert window.next_open(noon) == datetime(2024, 1, 11, 19, 0, tzinfo=UTC)
    late = datetime(2024, 1, 11, 20, 30, tzinfo=UTC)
    assert window.next_open(late) == late
    # In summer, Paris is UTC+2; a day window, in UTC by default, opens the next day once past.
    assert window.next_open(datetime(2024, 7, 1, 12, tzinfo=UTC)) == datetime(2024, 7, 1, 18, tzinfo=UTC)
    office = LaunchWindow.parse("09:00-17:00")
    assert office.next_open(datetime(2024, 1, 1, 18, tzinfo=UTC)) == datetime(2024, 1, 2, 9, tzinfo=UTC)


def test_the_schedule_launches_within_the_allowance_and_its_pool_caps():
    graph = graph_of("src")
    schedule = Schedule(graph, Throttle(max_parallel=4), batch_chains=False, pools={dg.AssetKey("src"): "spark"})
    assert schedule.next_units(STOPPED) == []
    first = schedule.next_units(Allowance(runs=3, pool_runs={"spark": 2}))
    assert len(first) == 2  # the pool's cap, under the backfill's share of 3
    assert schedule.next_units(Allowance(runs=3, pool_runs={"spark": 2})) == []
    schedule.finish(first[0], results(first[0]))
    assert len(schedule.next_units(Allowance(runs=3, pool_runs={"spark": 2}))) == 1
    assert len(schedule.next_units(UNLIMITED)) == 2  # grown back to the throttle's 4


def test_outside_its_window_the_loop_launches_nothing_then_launches_once_it_opens(monkeypatch):
    """The loop asks the allowance before every launch: the first asks find the window closed."""
    monkeypatch.setattr(loop, "STOP_POLL_SECONDS", 0.01)
    graph = graph_of("src")
    asks = []

    def window_allowance() -> Allowance:
        asks.append(len(launched))
        return STOPPED if len(asks) <= 2 else UNLIMITED

    launched = []

    def launch(unit):
        launched.append(unit)
        future: Future = Future()
        future.set_result(results(unit))
        return future

    statuses = execute(graph, launch, Throttle(max_parallel=2), allowance=window_allowance, batch_chains=False)
    assert asks[:3] == [0, 0, 0]  # nothing launched while closed
    assert len(launched) == graph.node_count() and all(status == "succeeded" for status in statuses.values())


def _run(instance, status: dg.DagsterRunStatus, asset: str, node_run_of: str | None = None) -> dg.DagsterRun:
    """A run of `asset` in `status`; with `node_run_of`, a node run of that backfill (its id and
    tags as its coordinator makes them, lease proof included)."""
    run_id, tags = str(uuid.uuid4()), {}
    if node_run_of is not None:
        run_id, tags = NodeRunProofs(instance).proved({BACKFILL_ID_TAG: node_run_of, DAGSTER_BACKFILL_TAG: node_run_of})
    run = dg.DagsterRun(
        job_name="__ASSET_JOB", run_id=run_id, status=status, tags=tags, asset_selection=frozenset({dg.AssetKey(asset)})
    )
    return instance.add_run(run)


@dg.asset(pool="spark")
def pooled() -> None: ...


def test_the_launch_gate_yields_to_production_runs_of_the_instance_and_grows_back_after(instance):
    store = BackfillStore(instance)
    record = record_at(store, "b1", S.RUNNING, SPEC)
    record_at(store, "b0", S.RUNNING, SPEC)  # an older running backfill of equal priority: it shares
    announce(instance, "b0", seconds_ago=0)  # while its coordinator is live
    record_at(store, "b_dead", S.RUNNING, SPEC)  # one whose coordinator fell silent: it claims no share
    announce(instance, "b_dead", seconds_ago=3600)
    pools = asset_pools(dg.Definitions(assets=[pooled]).resolve_asset_graph())
    assert pools == {dg.AssetKey("pooled"): "spark"}
    instance.event_log_storage.set_concurrency_slots("spark", 4)
    capacity = BackfillCapacity(max_runs=6, max_runs_under_production=2)

    def decided() -> Allowance:
        return LaunchGate(instance, record, capacity, pools)._decide()

    assert decided() == Allowance(3, {"spark": 3})  # half of 6; the pool's last slot kept
    production = _run(instance, dg.DagsterRunStatus.STARTED, "pooled")
    _run(instance, dg.DagsterRunStatus.NOT_STARTED, "other")
    # Another backfill's run in the pool; a finished run and this backfill's own run count for nothing.
    _run(instance, dg.DagsterRunStatus.STARTED, "pooled", node_run_of="b0")
    _run(instance, dg.DagsterRunStatus.SUCCESS, "pooled")
    _run(instance, dg.DagsterRunStatus.STARTED, "pooled", node_run_of="b1")
    assert decided() == Allowance(1, {"spark": 1})  # 2 under production, halved; 4 - production's 1 - 1 free - b0's 1
    instance.report_run_canceled(production)
    for run in instance.get_runs(dg.RunsFilter(statuses=[dg.DagsterRunStatus.NOT_STARTED])):
        instance.report_run_canceled(run)
    assert decided() == Allowance(3, {"spark": 2})  # production idle: grown back


def test_a_paused_backfill_or_one_outside_its_window_is_allowed_nothing(instance):
    store = BackfillStore(instance)
    night = BackfillSpec(module=SPEC.module, selection=SPEC.selection, window="20:00-06:00")
    record = record_at(store, "b1", S.RUNNING, night)
    noon, evening = datetime(2024, 1, 1, 12, tzinfo=UTC), datetime(2024, 1, 1, 21, tzinfo=UTC)
    assert LaunchGate(instance, record, BackfillCapacity(), {}, now=lambda: noon).allowance() == STOPPED
    assert LaunchGate(instance, record, BackfillCapacity(), {}, now=lambda: evening).allowance() != STOPPED
    pause(store, "b1")
    assert LaunchGate(instance, record, BackfillCapacity(), {}, now=lambda: evening).allowance() == STOPPED


def test_pause_and_unpause_are_guarded_transitions_and_a_refusal_writes_nothing(instance):
    store = BackfillStore(instance)
    record_at(store, "b1", S.RUNNING, SPEC)
    pause(store, "b1")
    pause(store, "b1")  # again: harmless
    assert store.status("b1") == S.PAUSED
    unpause(store, "b1")
    assert store.status("b1") == S.RUNNING
    with pytest.raises(IllegalTransitionError, match="cannot unpause it, it is not paused"):
        unpause(store, "b1")
    record_at(store, "b2", S.DONE, SPEC)
    before = version_of(store, "b2")
    with pytest.raises(IllegalTransitionError, match=r"is done: cannot pause it.*Nothing was written"):
        pause(store, "b2")
    assert store.status("b2") == S.DONE and version_of(store, "b2") == before


def test_a_backfill_given_fewer_runs_than_it_asks_is_told_how_many_and_which_rules_cut_it():
    alone = [Claimant("b1", 0, 4)]
    queue = "the instance runs at most 4 at a time (run_queue.max_concurrent_runs)"
    reserve = "partition_assets.backfills.reserve_runs keeps 1 free for production runs"
    assert fewer_runs_reason(BackfillCapacity(), Load(max_concurrent_runs=4), alone, "b1") == (
        f"runs at most 3 at a time, not --max-parallel 4: {queue}, {reserve}"
    )
    assert fewer_runs_reason(BackfillCapacity(reserve_runs=0), Load(max_concurrent_runs=4), alone, "b1") is None
    assert fewer_runs_reason(BackfillCapacity(), Load(max_concurrent_runs=5), alone, "b1") is None
    assert fewer_runs_reason(BackfillCapacity(), Load(max_concurrent_runs=5, production_runs=2), alone, "b1") == (
        f"runs at most 2 at a time, not --max-parallel 4: the instance runs at most 5 at a time "
        f"(run_queue.max_concurrent_runs), {reserve}, 2 runs of production hold slots"
    )
    assert fewer_runs_reason(CAPACITY, Load(production_runs=1), alone, "b1") == (
        "runs at most 1 at a time, not --max-parallel 4: 1 run of production queued or running, "
        "and partition_assets.backfills.max_runs_under_production is 1"
    )
    two = [Claimant("b0", 0, 4), Claimant("b1", 0, 4)]
    assert fewer_runs_reason(BackfillCapacity(max_runs=6), Load(), two, "b1") == (
        "runs at most 3 at a time, not --max-parallel 4: 1 other running backfill shares it"
    )
    assert fewer_runs_reason(BackfillCapacity(max_runs=2), Load(), alone, "b1") == (
        "runs at most 2 at a time, not --max-parallel 4: partition_assets.backfills.max_runs is 2"
    )


def test_an_instance_without_a_capacity_declares_no_caps(instance):
    assert capacity_of(instance) == BackfillCapacity()


def test_the_launchpad_job_pauses_and_unpauses_and_fails_a_refused_change_writing_nothing(instance):
    store = BackfillStore(instance)
    record_at(store, "b1", S.RUNNING, SPEC)
    job = pause_backfill_job()
    assert job.execute_in_process(run_config=pause_run_config("b1"), instance=instance).success
    assert store.status("b1") == S.PAUSED
    assert job.execute_in_process(run_config=pause_run_config("b1", "unpause"), instance=instance).success
    assert store.status("b1") == S.RUNNING
    record_at(store, "b2", S.PUBLISHED, SPEC)
    before = version_of(store, "b2")
    refused = job.execute_in_process(run_config=pause_run_config("b2"), instance=instance, raise_on_error=False)
    assert not refused.success
    assert store.status("b2") == S.PUBLISHED and version_of(store, "b2") == before


def test_on_lease_fail_is_the_default_and_wait_queues_behind_the_holder_until_it_lets_go(tmp_path, monkeypatch):
    assert SPEC.on_lease == "fail"
    with pytest.raises(BackfillPlanError, match="--on-lease 'later' is not a choice"):
        BackfillSpec(module="m", selection="key:a", on_lease="later")
    monkeypatch.setattr(lease_queue, "LEASE_POLL_SECONDS", 0.05)
    table = str(tmp_path / "lake" / "orders")
    scope = PartitionScope(("ds",), frozenset({("2024-01-01",)}))
    holder = acquire(table, "first", "backfill", scope)
    with pytest.raises(PartitionLeasedError, match="first"):  # what --on-lease fail does: fail at once
        acquire(table, "second", "backfill", scope)
    refusals: list[PartitionLeasedError] = []
    taken: list = []
    waiter = threading.Thread(
        target=lambda: taken.extend(
            leases_when_free(lambda: [acquire(table, "second", "backfill", scope)], refusals.append)
        )
    )
    waiter.start()
    wait_for(lambda: refusals, timeout=10, step=0.02)
    assert waiter.is_alive() and not taken  # queued behind "first"
    release(holder)
    waiter.join(timeout=10)
    assert [lease.holder for lease in taken] == ["second"] and "first" in str(refusals[0])


def test_backfill_list_shows_share_queue_position_and_window(instance):
    store = BackfillStore(instance)
    night = BackfillSpec(module=SPEC.module, selection=SPEC.selection, window="20:00-06:00", priority=1)
    record_at(store, "old", S.RUNNING, SPEC)
    record_at(store, "urgent", S.RUNNING, night)
    record_at(store, "dead", S.RUNNING, SPEC)
    record_at(store, "held", S.PAUSED, SPEC)
    announce(instance, "old", seconds_ago=0)
    announce(instance, "urgent", seconds_ago=0)
    announce(instance, "dead", seconds_ago=3600)  # its coordinator fell silent: it claims nothing
    noon = datetime(2024, 1, 1, 12, tzinfo=UTC)
    lines = {standing.record.id: standing.line(noon) for standing in standings(instance, store)}
    # The test instance's run queue allows 10 runs: 9 for backfills, the reserve kept; urgent first.
    assert "share 4 runs  queue #1" in lines["urgent"] and "next launch at 2024-01-01 20:00 UTC" in lines["urgent"]
    assert "share 4 runs  queue #2" in lines["old"] and "window: any time" in lines["old"]
    assert "no share: no live coordinator" in lines["dead"] and "queue" not in lines["dead"]
    assert "paused: launches nothing until `partition-assets backfill unpause held`" in lines["held"]
    assert "queue" not in lines["held"]


def test_the_pause_job_reads_a_run_config_written_with_the_action_s_word(instance):
    """A run config as written before the action was typed (a re-executed run's, say): the word."""
    store = BackfillStore(instance)
    record_at(store, "b1", S.PAUSED, SPEC)
    written = {"ops": {PAUSE_OP: {"config": {"backfill_id": "b1", "action": "unpause"}}}}
    assert pause_run_config("b1", "unpause") == written
    assert pause_backfill_job().execute_in_process(run_config=written, instance=instance).success
    assert store.status("b1") == S.RUNNING
