"""A backfill's status in the instance's database: every status-changing command refuses a
status that does not allow it (exit 2, the status and the command that fits named, nothing
written); writers in separate processes racing to change one status lose no update, and
one writing a record it read before another wrote it is refused;
`backfill_status` and the UI's backfill page show a coordinator that fell silent, never a live one in another pid
namespace of this host; and hosts noticing it at once take its backfill over exactly once (the opt-in takeover
sensor)."""

import os
import re
import socket
from pathlib import Path

import dagster as dg
import pytest

from partition_assets import SilentConsole, backfill_status, resume_backfill
from partition_assets.automation import coordinator_takeover_sensor, sparse_backfill_job
from partition_assets.backfill.dagster_ui.mirror import DagsterBackfillMirror
from partition_assets.backfill.model import Approval, BackfillCommand, BackfillStatus
from partition_assets.backfill.planning.graph import plan
from partition_assets.backfill.planning.run_config import COORDINATOR_OP
from partition_assets.backfill.state.presence import coordinating
from partition_assets.backfill.state.record import BackfillRecord
from partition_assets.backfill.state.store import BackfillStore
from partition_assets.backfill.state.takeover_claims import claim_takeovers
from partition_assets.code_location import load_definitions
from partition_assets.dagster_internals import BulkActionStatus
from partition_assets.errors import CoordinatorLiveError, RecordChangedError
from partition_assets.run_tags import BACKFILL_ID_TAG, TAKEOVER_TAG
from partition_assets.storage.leases import TTL_ENV
from partition_assets_tests.integration.test_cli_main import files_under, run_in_process
from partition_assets_tests.support import REPO
from partition_assets_tests.support.instances import also_on_postgres
from partition_assets_tests.support.pid_namespaces import NamespacedCoordinator, pid_free_here, usable
from partition_assets_tests.support.racing import racing_context, racing_process
from partition_assets_tests.support.records import (
    SPEC,
    announce,
    backfill_store,
    race_takeovers,
    race_transitions,
    record_at,
    version_of,
)

S = BackfillStatus

# (command, the status it meets, what the refusal says fits that status)
ILLEGAL_TRANSITIONS = [
    ("cancel", S.PUBLISHED, "use `partition-assets backfill rollback bf1` to undo it"),
    ("cancel", S.PUBLISHING, "`partition-assets backfill rollback bf1` undoes it"),
    ("cancel", S.ROLLED_BACK, "it is final"),
    ("resume", S.PUBLISHED, "backfill rollback bf1"),
    ("resume", S.DONE, "it is final"),
    ("retry", S.DISCARDED, "it is final"),
    ("retry", S.ROLLING_BACK, "`partition-assets backfill resume bf1` finishes its rollback"),
    ("publish", S.RUNNING, "`partition-assets backfill cancel bf1`"),
    ("publish", S.CANCELED, "`partition-assets backfill resume bf1` runs it on"),
    ("publish", S.PUBLISHED, "backfill rollback bf1"),
    ("discard", S.PUBLISHED, "backfill rollback bf1"),
    ("discard", S.ROLLING_BACK, "backfill resume bf1"),
    ("rollback", S.GATE_FAILED, "`partition-assets backfill publish bf1 --force`"),
    ("rollback", S.FAILED, "`partition-assets backfill retry bf1`"),
]


def test_the_illegal_transitions_cover_every_status_changing_command():
    assert len(ILLEGAL_TRANSITIONS) >= 8
    assert {command for command, _, _ in ILLEGAL_TRANSITIONS} == {
        "cancel",
        "resume",
        "retry",
        "publish",
        "discard",
        "rollback",
    }


@pytest.mark.parametrize(
    ("command", "status", "fits"), ILLEGAL_TRANSITIONS, ids=[f"{c}-{s.value}" for c, s, _ in ILLEGAL_TRANSITIONS]
)
def test_an_illegal_transition_exits_2_naming_the_status_and_the_fitting_command_and_writes_nothing(
    command, status, fits, home, capsys, monkeypatch
):
    monkeypatch.chdir(REPO)
    with dg.DagsterInstance.get() as instance:
        record_at(BackfillStore(instance), "bf1", status, SPEC)
    with backfill_store(home) as store:
        version = version_of(store, "bf1")
    files = files_under(home)

    code, stderr = run_in_process(["backfill", command, "bf1"], capsys)

    assert code == 2 and "Traceback" not in stderr, stderr
    assert len(stderr.strip().splitlines()) == 1, stderr
    assert f"backfill bf1 is {status.value}: cannot {command} it" in stderr, stderr
    assert fits in stderr and "Nothing was written." in stderr, stderr
    with backfill_store(home) as store:
        assert (store.status("bf1"), version_of(store, "bf1")) == (status, version)
    assert files_under(home) == files
    with dg.DagsterInstance.get() as instance:
        assert instance.get_runs() == [] and instance.get_backfill("bf1") is None


RACERS, ROUNDS, COUNTED = 4, 12, 20
# What the racers ask for: a cancel (canceled may follow canceled) and the coordinator's publish.
RACING = [(S.CANCELED.value, "cancel"), (S.PUBLISHING.value, "coordinate")]


def run_racers(home, plans: list[list[tuple[str, str, str]]]) -> list[tuple[str, str, str]]:
    """Starts one process per plan of `plans` (its steps: backfill id, target, action), all
    taking each step at once (a barrier); returns every outcome."""
    context = racing_context(__name__)  # a process of its own, as another host's
    barrier, outcomes = context.Barrier(len(plans)), context.Queue()
    racers = [racing_process(context, race_transitions, str(home), steps, barrier, outcomes) for steps in plans]
    for racer in racers:
        racer.start()
    results = [outcomes.get(timeout=120) for steps in plans for _ in steps]
    for racer in racers:
        racer.join(timeout=60)
        assert racer.exitcode == 0
    return results


@also_on_postgres("home")
def test_processes_racing_to_change_a_status_lose_no_update_and_never_both_win(home):
    """Four processes at once per backfill, two canceling and two publishing it: the winners
    are all of one kind, the stored status is theirs, and each loser was told the status it
    met. Then the four resume one backfill 20 times each: every write counts (its version
    grows by 80), none is lost to another written at the same moment."""
    ids = [f"race{round_}" for round_ in range(ROUNDS)]
    with backfill_store(home) as store:
        for backfill_id in [*ids, "counted"]:
            record_at(store, backfill_id, S.RUNNING, SPEC)
        counted_from = version_of(store, "counted")
    counted = [("counted", S.RUNNING.value, "resume")] * COUNTED

    outcomes = run_racers(
        home,
        [[(bid, target, action) for bid in ids] + counted for target, action in RACING] * (RACERS // len(RACING)),
    )

    with backfill_store(home) as store:
        for backfill_id in ids:
            mine = [(target, outcome) for bid, target, outcome in outcomes if bid == backfill_id]
            winners = {target for target, outcome in mine if outcome == "moved"}
            stored = store.status(backfill_id)
            assert winners == {stored.value}, (backfill_id, mine)
            for target, outcome in mine:
                if outcome != "moved":
                    assert f"backfill {backfill_id} is {stored.value}: cannot" in outcome, outcome
                    assert target != stored.value
        assert version_of(store, "counted") == counted_from + RACERS * COUNTED
        assert store.status("counted") == S.RUNNING


@also_on_postgres("home")
def test_a_record_written_from_a_stale_read_is_refused_and_a_status_change_meanwhile_is_no_conflict(home):
    """Two processes' views of one record (two instances on its database): the second write of
    fields read before the first is refused, writing nothing; a status changed by another
    writer between a read and a write does not refuse it, nor is it overwritten."""
    with backfill_store(home) as first, backfill_store(home) as second:
        record_at(first, "cas1", S.AWAITING_APPROVAL, SPEC)
        publishing, stale = first.load("cas1"), second.load("cas1")
        publishing.published_versions = {"raw": 3}
        first.transition("cas1", S.PUBLISHING, "approve")  # another writer's status change: no conflict
        publishing.save()
        version = version_of(first, "cas1")
        stale.approval = Approval(approved_by="bruno")
        with pytest.raises(RecordChangedError, match="another process changed its record.*Nothing was written"):
            stale.save()
        stored = second.load("cas1")
        assert (stored.published_versions, stored.approval, stored.status) == ({"raw": 3}, None, S.PUBLISHING)
        assert version_of(first, "cas1") == version
        with pytest.raises(RecordChangedError, match="another process recorded a backfill of this id first"):
            BackfillRecord(SPEC, id="cas1", store=second).save()


def test_status_shows_a_coordinator_silent_for_longer_than_the_ttl_and_the_command_that_takes_over(home, monkeypatch):
    monkeypatch.setenv(TTL_ENV, "30")
    with backfill_store(home) as store:
        record_at(store, "live1", S.RUNNING, SPEC)
        record_at(store, "dead1", S.RUNNING, SPEC)
        record_at(store, "done1", S.PUBLISHED, SPEC)
    announced = ("live1", "dead1", "done1")
    with dg.DagsterInstance.get() as instance:
        announce(instance, "live1", seconds_ago=5)
        announce(instance, "dead1", seconds_ago=31)
        announce(instance, "done1", seconds_ago=31)  # a published backfill needs no coordinator
        # The status's `coordinator:` line, if any (what `backfill status` prints of it).
        noted = {backfill_id: backfill_status(instance, backfill_id).silence or "" for backfill_id in announced}

    silent = [line for line in noted["dead1"].splitlines() if line.startswith("coordinator: silent")]
    assert len(silent) == 1, noted["dead1"]
    assert re.search(r"pid 4242 on another-host, last heartbeat 3\d s ago; the lease TTL is 30 s", silent[0]), silent
    assert "`partition-assets backfill resume dead1` takes it over" in silent[0], silent
    assert "coordinator:" not in noted["live1"] + noted["done1"]


def test_a_live_coordinator_in_another_pid_namespace_of_this_host_is_not_taken_for_dead(home, monkeypatch):
    """Issue 39, hole 5: a coordinator in a container on this host (host networking: same host name) announced a
    pid that names no process outside it. `status` called it dead, `resume` was accepted (every node then ran twice)
    and the takeover sensor claimed it. Its pid cannot be looked up here, so its heartbeat judges it: live while it
    beats."""
    unusable = usable()
    if unusable is not None:
        pytest.skip(unusable)
    monkeypatch.setenv(TTL_ENV, "600")
    with backfill_store(home) as store:
        record_at(store, "bf1", S.RUNNING, SPEC)
    pid = pid_free_here()
    with NamespacedCoordinator("bf1", pid) as coordinator:
        assert coordinator.pid_or_error() == pid
        assert not Path(f"/proc/{pid}").exists()  # no process of this namespace has its pid

        with dg.DagsterInstance.get() as instance:
            assert backfill_status(instance, "bf1").silence is None  # no `coordinator:` line
            with pytest.raises(CoordinatorLiveError) as refusal:
                resume_backfill(instance, "bf1", SilentConsole())
            refused = str(refusal.value)
            assert f"backfill bf1 has a live coordinator (pid {pid} on {socket.gethostname()}," in refused, refused
            assert "Nothing was changed." in refused
            assert claim_takeovers(instance, BackfillStore(instance)) == []
            assert BackfillStore(instance).status("bf1") == S.RUNNING


@also_on_postgres("home")
def test_hosts_noticing_a_dead_coordinator_at_once_take_its_backfill_over_exactly_once(home, monkeypatch):
    """Four processes (hosts) claim at the same moment: one wins the backfill whose coordinator
    fell silent; none claims a live one, one never announced, or one past publishing; and
    nobody claims it again within the grace the new coordinator has to announce itself."""
    monkeypatch.setenv(TTL_ENV, "600")  # longer than the racers take to start
    with dg.DagsterInstance.get() as instance:
        store = BackfillStore(instance)
        for backfill_id, status, seconds_ago in [
            ("dead1", S.RUNNING, 601),
            ("dead2", S.PUBLISHING, 601),
            ("live1", S.RUNNING, 5),
            ("rolled1", S.PUBLISHED, 601),
            ("quiet1", S.RUNNING, None),
        ]:
            record_at(store, backfill_id, status, SPEC)
            if seconds_ago is not None:
                announce(instance, backfill_id, seconds_ago)

    context = racing_context(__name__)
    barrier, outcomes = context.Barrier(RACERS), context.Queue()
    hosts = [racing_process(context, race_takeovers, str(home), barrier, outcomes) for _ in range(RACERS)]
    for host in hosts:
        host.start()
    won = [outcomes.get(timeout=120) for _ in hosts]
    for host in hosts:
        host.join(timeout=60)
        assert host.exitcode == 0

    assert sorted(backfill_id for claims in won for backfill_id in claims) == ["dead1", "dead2"], won
    with dg.DagsterInstance.get() as instance:
        assert claim_takeovers(instance, BackfillStore(instance)) == []  # within the grace


def test_the_takeover_sensor_requests_one_engine_run_per_dead_coordinator_tagged_to_resume_it(home, monkeypatch):
    monkeypatch.setenv(TTL_ENV, "30")
    job = sparse_backfill_job("partition_assets_tests.support.locations.engine_defs")
    sensor = coordinator_takeover_sensor(job)
    with dg.DagsterInstance.get() as instance:
        record_at(BackfillStore(instance), "dead1", S.RUNNING, SPEC)
        announce(instance, "dead1", seconds_ago=31)

        requests = sensor(dg.build_sensor_context(instance=instance))
        again = sensor(dg.build_sensor_context(instance=instance))

    (request,) = requests
    assert request.tags == {BACKFILL_ID_TAG: "dead1", TAKEOVER_TAG: "true"}
    config = request.run_config["ops"][COORDINATOR_OP]["config"]
    assert (config["selection"], config["start"], config["end"]) == ("key:raw", "2024-01-01", "2024-01-02")
    assert dg.validate_run_config(job, request.run_config)
    assert isinstance(again, dg.SkipReason) and "no backfill lost its coordinator" in again.skip_message


def test_the_ui_backfill_page_of_a_backfill_whose_coordinator_died_says_so(home, monkeypatch):
    """The webserver reads a backfill through the instance's `get_backfill`: an engine backfill in
    progress whose coordinator fell silent carries the status line as its error; a live one none."""
    monkeypatch.setenv(TTL_ENV, "30")
    asset_graph = load_definitions(SPEC.module).resolve_asset_graph()
    with dg.DagsterInstance.get() as instance:
        store = BackfillStore(instance)
        for backfill_id in ("dead1", "live1"):
            record = record_at(store, backfill_id, S.RUNNING, SPEC)
            with DagsterBackfillMirror(record, plan(asset_graph, SPEC), asset_graph, instance, done=()):
                pass  # its Dagster backfill, in progress as a running coordinator leaves it
        announce(instance, "dead1", seconds_ago=31)
        announce(instance, "live1", seconds_ago=5)

        dead, live = instance.get_backfill("dead1"), instance.get_backfill("live1")

    assert dead.status == live.status == BulkActionStatus.REQUESTED
    assert dead.error is not None and dead.error.message.startswith("coordinator: silent (pid 4242 on another-host")
    assert "`partition-assets backfill resume dead1` takes it over" in dead.error.message
    assert live.error is None


def test_a_coordinator_that_takes_over_a_lost_one_logs_what_it_took_over_from(home, monkeypatch, caplog):
    """Issue 55: a resumed or taken-over backfill's log named no fault; the soak checks that each
    one is named (bench/soak/invariants.py `faults_named`). A claim over a silent coordinator's
    announcement says whose, and when it last beat; a claim over none says nothing."""
    monkeypatch.setenv(TTL_ENV, "30")
    with dg.DagsterInstance.get() as instance:
        announce(instance, "dead1", seconds_ago=31)
        with caplog.at_level("WARNING"), coordinating(instance, "dead1", BackfillCommand.RESUME):
            pass
        with caplog.at_level("WARNING"), coordinating(instance, "never1", BackfillCommand.RUN):
            pass
    (line,) = [record.getMessage() for record in caplog.records if "coordinator was lost" in record.getMessage()]
    assert line == (
        "backfill dead1: its coordinator was lost (pid 4242 on another-host, last heartbeat 31 s ago): "
        f"it fell silent; this process (pid {os.getpid()}) takes it over"
    ), line
