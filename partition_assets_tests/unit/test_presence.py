"""Which process a coordinator's announcement names (processes/identity.py) and when it is
live (backfill/state/presence.py): host, boot id, pid and time namespaces and start time,
never host and pid alone. A process is dead at once only when it is provably gone; one
this process cannot look up is judged by its heartbeat alone (issue 39, hole 5)."""

import dataclasses
import json
import time

from partition_assets.backfill.state.presence import Presence, _parse
from partition_assets.processes.identity import ProcessIdentity

# Above the kernel's largest pid (PID_MAX_LIMIT, 2**22): no process ever has it.
NO_SUCH_PID = 2**22 + 1
TTL = 30.0


def test_this_process_is_not_gone_and_its_pid_with_another_start_time_is():
    """A reused pid (another process now, started at another time) is gone at once, not a
    lease TTL later."""
    me = ProcessIdentity.of_this_process()
    assert None not in (me.boot_id, me.namespaces, me.started), me
    assert me.namespaces.startswith("pid:[")
    assert not me.is_gone()
    assert dataclasses.replace(me, started=me.started + 1).is_gone()
    assert dataclasses.replace(me, pid=NO_SUCH_PID).is_gone()


def test_a_process_this_one_cannot_look_up_is_never_called_gone():
    """Another pid namespace (a container on the same host), boot or host, or an
    announcement that does not say which process it is: its pid names nothing here."""
    me = ProcessIdentity.of_this_process()
    elsewhere = [
        dataclasses.replace(me, pid=NO_SUCH_PID, namespaces="pid:[1] time:[2]"),
        dataclasses.replace(me, pid=NO_SUCH_PID, boot_id="another-boot"),
        dataclasses.replace(me, pid=NO_SUCH_PID, host="another-host"),
        ProcessIdentity(me.host, NO_SUCH_PID),
    ]
    assert [process.is_gone() for process in elsewhere] == [False] * len(elsewhere)


def test_a_coordinator_is_live_while_it_beats_unless_provably_gone():
    now = time.time()
    me = ProcessIdentity.of_this_process()
    in_another_container = dataclasses.replace(me, pid=NO_SUCH_PID, namespaces="pid:[1] time:[2]")
    assert Presence(me, "t", now - 1).is_live(now, TTL)
    assert not Presence(me, "t", now - TTL).is_live(now, TTL)
    assert Presence(in_another_container, "t", now - 1).is_live(now, TTL)  # silent only once its beat is old
    assert not Presence(in_another_container, "t", now - TTL).is_live(now, TTL)
    assert not Presence(dataclasses.replace(me, started=me.started + 1), "t", now - 1).is_live(now, TTL)


def test_an_announcement_naming_host_and_pid_alone_is_judged_by_its_heartbeat():
    """As written before announcements said which process: never dead before its TTL."""
    now = time.time()
    me = ProcessIdentity.of_this_process()
    legacy = _parse(json.dumps({"host": me.host, "pid": NO_SUCH_PID, "token": "t", "heartbeat_at": now - 1}), "b1")
    assert legacy == Presence(ProcessIdentity(me.host, NO_SUCH_PID), "t", now - 1)
    assert legacy.is_live(now, TTL)
    current = Presence(me, "t", now)
    assert _parse(current.to_text(), "b1") == current
