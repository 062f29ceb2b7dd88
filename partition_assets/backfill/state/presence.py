"""Whether a backfill's coordinator is alive, as every process of the deployment sees it.

A coordinator announces itself for as long as it holds its backfill (runs its nodes,
gates, publishes, rolls back, discards): a heartbeat in the Dagster instance's key-value
store (`partition_assets/coordinator/<backfill_id>`: which process it is, a token, the time
of the last beat), refreshed by a thread every quarter of the lease TTL
(PARTITION_ASSETS_LEASE_TTL, storage/leases.py), and cleared when it lets go. The process
is named by host, kernel boot id, pid and time namespaces, pid and start time
(processes/identity.py), never by host and pid alone: the same host name and pid can be
another process in another container (host networking, Kubernetes `hostNetwork`), or
after a reboot or a pid reuse.

A coordinator is live while its beat is younger than the TTL, unless its process is
provably gone: one in this host's boot and pid namespace whose pid is free, a zombie, or
another process (another start time) is dead at once. One this process cannot look up
(another host, boot or pid namespace) is judged by its beat alone: silent once the beat is
older than the TTL, never dead before.

Commands that must not run beside a live coordinator (resume, retry, publish, discard,
rollback, re-executing a coordinator run) are refused while one is live
(`refuse_if_live`), naming the command that fits; `coordinating` claims the backfill
for one process. The freeze of a backfill whose coordinator is not live is ignored
(backfill/publishing/freeze.py), so a killed coordinator never freezes its assets for good.

An announcement carries its format version (state_formats.py): one a newer release
wrote is refused (StateFormatError), never taken for "no coordinator", so a process not yet
upgraded never claims a backfill a newer coordinator holds.

Claims, beats and the release are compare-and-sets on the announcement
(dagster_instance/key_values.py): a claim replaces only the announcement it read (absent,
let go, or dead), a beat or the release only this process's own last one. Of two
processes claiming the same backfill at once, on any hosts, exactly one wins; the other
reads the winner's announcement and is refused.

Not guaranteed: a coordinator paused for longer than the TTL is taken for dead; its
beats stop once they find another claim in place (`lost`). Outside Linux a coordinator
is never proved dead: it is taken for dead once its beat is older than the TTL.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass

import dagster as dg

from partition_assets.backfill.model import BackfillCommand
from partition_assets.dagster_instance.key_values import swap, value_of
from partition_assets.errors import CoordinatorLiveError
from partition_assets.processes.identity import ProcessIdentity
from partition_assets.state_formats import FORMAT_FIELD, PRESENCE_FORMAT, checked_format
from partition_assets.storage.leases import lease_ttl

_log = logging.getLogger(__name__)
KEY_PREFIX = "partition_assets/coordinator"
# A claim reads and swaps again when another claimant changed the announcement meanwhile;
# each round someone won, so more rounds than this mean a store that is not changing.
_CLAIM_ROUNDS = 20


def _key(backfill_id: str) -> str:
    return f"{KEY_PREFIX}/{backfill_id}"


@dataclass(frozen=True)
class Presence:
    """One coordinator's announcement: its `process`, and its last beat (`heartbeat_at`: epoch seconds)."""

    process: ProcessIdentity
    token: str
    heartbeat_at: float

    def is_live(self, now: float, ttl: float) -> bool:
        """A beat younger than `ttl`, from a process not provably gone (see the module docstring)."""
        return now - self.heartbeat_at < ttl and not self.process.is_gone()

    def to_text(self) -> str:
        """The announcement as stored, in this release's format."""
        return json.dumps({FORMAT_FIELD: PRESENCE_FORMAT, **asdict(self)})

    def describe(self, now: float) -> str:
        process = self.process
        return f"pid {process.pid} on {process.host}, last heartbeat {max(0.0, now - self.heartbeat_at):.0f} s ago"


def live_coordinators(instance: dg.DagsterInstance, backfill_ids: Iterable[str]) -> dict[str, Presence]:
    """The backfills of `backfill_ids` whose coordinator is live, with its announcement (one query).

    Raises:
        EnvironmentSetupError: PARTITION_ASSETS_LEASE_TTL is set but not a positive number.
        StateFormatError: A newer release wrote the announcement, in a format this one does not read.
    """
    return {
        backfill_id: presence
        for backfill_id, presence in _announced(instance, backfill_ids).items()
        if presence is not None and presence.is_live(time.time(), lease_ttl())
    }


def stopped_coordinators(instance: dg.DagsterInstance, backfill_ids: Iterable[str]) -> set[str]:
    """The backfills of `backfill_ids` whose coordinator announced itself and is no longer
    live (let go, or dead); not those never announced (one query).

    Raises:
        EnvironmentSetupError: PARTITION_ASSETS_LEASE_TTL is set but not a positive number.
        StateFormatError: A newer release wrote the announcement, in a format this one does not read.
    """
    now, ttl = time.time(), lease_ttl()
    return {
        backfill_id
        for backfill_id, presence in _announced(instance, backfill_ids).items()
        if presence is None or not presence.is_live(now, ttl)
    }


def _announced(instance: dg.DagsterInstance, backfill_ids: Iterable[str]) -> dict[str, Presence | None]:
    """Each backfill of `backfill_ids` ever announced, with its announcement (None once let go)."""
    ids = sorted(set(backfill_ids))
    if not ids:
        return {}
    values = instance.run_storage.get_cursor_values({_key(backfill_id) for backfill_id in ids})
    return {
        backfill_id: _parse(values[_key(backfill_id)], backfill_id)
        for backfill_id in ids
        if _key(backfill_id) in values
    }


def silent_coordinators(instance: dg.DagsterInstance, backfill_ids: Iterable[str]) -> dict[str, Presence]:
    """The backfills of `backfill_ids` whose coordinator announced itself, never let go,
    and is no longer live (died), with its last announcement (one query).

    Raises:
        EnvironmentSetupError: PARTITION_ASSETS_LEASE_TTL is set but not a positive number.
        StateFormatError: A newer release wrote the announcement, in a format this one does not read.
    """
    now, ttl = time.time(), lease_ttl()
    return {
        backfill_id: presence
        for backfill_id, presence in _announced(instance, backfill_ids).items()
        if presence is not None and not presence.is_live(now, ttl)
    }


def live_coordinator(instance: dg.DagsterInstance, backfill_id: str) -> Presence | None:
    """The live coordinator of `backfill_id`, or None.

    Raises:
        EnvironmentSetupError: PARTITION_ASSETS_LEASE_TTL is set but not a positive number.
        StateFormatError: A newer release wrote the announcement, in a format this one does not read.
    """
    return live_coordinators(instance, [backfill_id]).get(backfill_id)


# What each command would break beside a live coordinator, and what to do instead.
_REFUSALS: dict[BackfillCommand, str] = {
    BackfillCommand.RUN: "it is running already",
    BackfillCommand.RESUME: "it is running already",
    BackfillCommand.RETRY: "it is running already",
    BackfillCommand.PUBLISH: "it publishes by itself once its nodes and gate are done",
    BackfillCommand.APPROVE: "another process (an approval, a discard) holds it now",
    BackfillCommand.DISCARD: "it is still writing the staged data that discard deletes",
    BackfillCommand.ROLLBACK: "it is still running",
    BackfillCommand.RE_EXECUTE: "it is running already",
    BackfillCommand.RETRACT: "it is retracting its partitions already",
    BackfillCommand.EXTEND: "its coordinator runs the plan it started with",
}


def refuse_if_live(instance: dg.DagsterInstance, backfill_id: str, action: BackfillCommand) -> None:
    """CoordinatorLiveError, naming the coordinator and the command that fits, when
    `backfill_id` has a live coordinator: `action` (a key of _REFUSALS) must wait.

    Args:
        action: The command that must wait: run, resume, retry, publish, approve, discard, rollback or re-execute.

    Raises:
        CoordinatorLiveError: `backfill_id`'s coordinator is live; nothing was changed.
        EnvironmentSetupError: PARTITION_ASSETS_LEASE_TTL is set but not a positive number.
        StateFormatError: A newer release wrote the announcement, in a format this one does not read.
    """
    presence = live_coordinator(instance, backfill_id)
    if presence is not None:
        raise _refusal(backfill_id, presence, action)


def _refusal(backfill_id: str, presence: Presence, action: BackfillCommand) -> CoordinatorLiveError:
    return CoordinatorLiveError(
        f"backfill {backfill_id} has a live coordinator ({presence.describe(time.time())}): cannot {action} it, "
        f"{_REFUSALS[action]}. Watch it with `partition-assets backfill status {backfill_id}`, or stop it with "
        f"`partition-assets backfill cancel {backfill_id}` and {action} once it has stopped (a killed "
        "coordinator on another host, or in another pid namespace such as another container, counts as "
        f"stopped {lease_ttl():.0f} s after its last heartbeat). "
        "Nothing was changed."
    )


class Announcement:
    """This process's claim on one backfill, kept alive by a thread (see `coordinating`).

    Raises:
        EnvironmentSetupError: PARTITION_ASSETS_LEASE_TTL is set but not a positive number.
    """

    def __init__(self, instance: dg.DagsterInstance, backfill_id: str) -> None:
        self._instance = instance
        self._backfill_id = backfill_id
        self._key = _key(backfill_id)
        self._token = uuid.uuid4().hex
        self._interval = lease_ttl() / 4
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="coordinator-heartbeat", daemon=True)
        self._announced: str | None = None  # the announcement this process last wrote
        self.lost = False  # another process claimed the backfill: this one must stop

    def claim(self, action: BackfillCommand) -> None:
        """Announces this process, replacing an announcement that is absent, let go or
        dead; CoordinatorLiveError when another live one holds the backfill.

        Args:
            action: The command that must wait: run, resume, retry, publish, discard, rollback or re-execute.

        Raises:
            CoordinatorLiveError: Another live coordinator holds the backfill.
            EnvironmentSetupError: PARTITION_ASSETS_LEASE_TTL is set but not a positive number.
            StateFormatError: A newer release wrote the announcement, in a format this one does not read.
        """
        ttl = lease_ttl()
        for _ in range(_CLAIM_ROUNDS):
            current = value_of(self._instance, self._key)
            presence = _parse(current, self._backfill_id)
            if presence is not None and presence.is_live(time.time(), ttl):
                raise _refusal(self._backfill_id, presence, action)
            if self._swap_from(current):
                self._thread.start()
                if presence is not None:  # a coordinator that never let go: say what this one takes over from
                    _log.warning(_takeover(self._backfill_id, presence))
                return
        raise CoordinatorLiveError(
            f"backfill {self._backfill_id}: other processes kept claiming it ({_CLAIM_ROUNDS} rounds): cannot "
            f"{action} it now; see who holds it with `partition-assets backfill status {self._backfill_id}`. "
            "Nothing was changed."
        )

    def release(self) -> None:
        """Stops the beats (waiting for one under way), then clears the announcement if still ours."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        if self._announced is not None:  # a swap: another claim in place stays
            swap(self._instance, self._key, self._announced, "")

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            if not self._swap_from(self._announced):  # another process claimed it meanwhile
                self.lost = True
                return

    def _swap_from(self, expected: str | None) -> bool:
        """A fresh beat in place of `expected`, if the store still holds it."""
        presence = Presence(ProcessIdentity.of_this_process(), self._token, time.time())
        text = presence.to_text()
        if not swap(self._instance, self._key, expected, text):
            return False
        self._announced = text
        return True


@contextmanager
def coordinating(instance: dg.DagsterInstance, backfill_id: str, action: BackfillCommand) -> Iterator[Announcement]:
    """This process is `backfill_id`'s coordinator for the block: refused
    (CoordinatorLiveError, nothing changed) while another coordinator is live;
    announced until the block ends, however it ends.

    Args:
        action: The command that must wait: run, resume, retry, publish, discard, rollback or re-execute.

    Raises:
        CoordinatorLiveError: Another coordinator of `backfill_id` is live; nothing was changed.
        EnvironmentSetupError: PARTITION_ASSETS_LEASE_TTL is set but not a positive number.
        StateFormatError: A newer release wrote the announcement, in a format this one does not read.
    """
    announcement = Announcement(instance, backfill_id)
    announcement.claim(action)
    try:
        yield announcement
    finally:
        announcement.release()


def _takeover(backfill_id: str, presence: Presence) -> str:
    """The line a coordinator logs when it claims a backfill from one that died holding it."""
    why = "its process is gone (killed, or its host restarted)" if presence.process.is_gone() else "it fell silent"
    return (
        f"backfill {backfill_id}: its coordinator was lost ({presence.describe(time.time())}): {why}; "
        f"this process (pid {os.getpid()}) takes it over"
    )


def _parse(text: str | None, backfill_id: str) -> Presence | None:
    """The announcement `text` of `backfill_id` (None: none, or let go), in this release's format or an older one.

    Raises:
        StateFormatError: A newer release wrote it, in a format this one does not read.
    """
    if not text:
        return None
    fields = json.loads(text)
    checked_format(fields, PRESENCE_FORMAT, f"the coordinator announcement of backfill {backfill_id}")
    fields.pop(FORMAT_FIELD, None)
    process = fields.pop("process", None)
    if process is None:  # written before announcements said which process: host and pid alone
        process = {"host": fields.pop("host"), "pid": fields.pop("pid")}
    return Presence(ProcessIdentity(**process), **fields)
