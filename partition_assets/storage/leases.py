"""Leases on partitions of a table: which backfill or run may write them now.

A lease is one JSON file `<table>/_leases/<holder>.json`, written atomically (a
temporary file renamed into place) through the table's pyarrow filesystem, so a
table on an object store is leased the same way as a local one. It names its
holder (a backfill id or a run id), its kind ("backfill" or "run"), the table's
partition columns and the partitions it covers (None: the whole table). It is
live while its heartbeat is younger than `lease_ttl()` seconds; a dead lease (its
holder crashed) is ignored by every check, so the next `acquire` takes its place.
A lease carries its format (state_formats.py): one a newer release wrote is refused
(StateFormatError) by every check that reads it, never taken for no lease.
A *parked* lease lives without a heartbeat: a backfill that stopped on purpose
with staged, unpublished data (a failed gate or node, a cancel) parks its leases,
so its partitions stay protected until it is published, resumed or discarded.

Taking a lease: `acquire` lists the live leases, fails fast on an overlapping
one of another holder, writes its own, then lists again. When two acquirers
race, the one that sees another overlapping lease after writing its own backs
off (deletes its lease, waits a random moment, starts over), so that two
acquirers never both win: of two writes, the later one's re-listing sees the
earlier one. After a few rounds of racing, the acquirer gives up and raises.

Not guaranteed: leases are advisory (a writer that does not call `check_write`
or `acquire` is not stopped); expiry compares heartbeats with this machine's
clock, so the clocks of the processes sharing a table must agree to well within
the TTL; a holder paused for longer than the TTL may find its lease taken over
(its heartbeat then stops refreshing it, see `Heartbeat`).
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
import urllib.parse
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Literal

import pyarrow.fs as pafs

from partition_assets.errors import PartitionLeasedError, StateFormatError
from partition_assets.settings import positive_seconds
from partition_assets.state_formats import FORMAT_FIELD, LEASE_FORMAT, checked_format
from partition_assets.storage.partition_scope import PartitionScope
from partition_assets.storage.write_staging import table_filesystem

LEASES_DIR = "_leases"
TTL_ENV = "PARTITION_ASSETS_LEASE_TTL"
DEFAULT_TTL_SECONDS = 60.0
LeaseKind = Literal["backfill", "run"]
_RACE_ROUNDS = 8
_SHOWN_PARTITIONS = 3

log = logging.getLogger(__name__)


def lease_ttl() -> float:
    """Seconds after its last heartbeat that a lease dies: PARTITION_ASSETS_LEASE_TTL, default 60.

    Raises:
        EnvironmentSetupError: PARTITION_ASSETS_LEASE_TTL is set but not a positive number.
    """
    return positive_seconds(TTL_ENV, DEFAULT_TTL_SECONDS)


@dataclass(frozen=True)
class Lease:
    """One holder's claim on partitions of one table (times are epoch seconds)."""

    table_uri: str
    holder: str
    kind: LeaseKind
    columns: tuple[str, ...]
    partitions: frozenset[tuple[str, ...]] | None  # None: the whole table
    acquired_at: float
    heartbeat_at: float
    parked: bool = False  # kept without a heartbeat until its holder releases it

    def is_live(self, now: float | None = None) -> bool:
        """Whether the lease is parked, or its heartbeat is younger than `lease_ttl()` at `now`.

        Args:
            now: The time to judge at, in epoch seconds; None for the current time.

        Raises:
            EnvironmentSetupError: PARTITION_ASSETS_LEASE_TTL is set but not a positive number.
        """
        return self.parked or (time.time() if now is None else now) - self.heartbeat_at < lease_ttl()

    def overlap(self, columns: tuple[str, ...], partitions: frozenset[tuple[str, ...]] | None) -> Overlap | None:
        """What this lease and a claim on `partitions` (None: the whole table) share, or None."""
        if self.partitions is None or partitions is None or self.columns != columns:
            # A whole-table claim, or partitioned by other columns: everything may collide.
            return Overlap(self, None)
        shared = self.partitions & partitions
        return Overlap(self, frozenset(shared)) if shared else None


@dataclass(frozen=True)
class Overlap:
    """A live lease in the way of a claim, and the partitions both cover."""

    lease: Lease
    partitions: frozenset[tuple[str, ...]] | None  # None: possibly any partition

    def error(self, table_uri: str, action: str) -> PartitionLeasedError:
        """The error refusing `action`: it names the lease's holder, what both cover and how to proceed.

        Args:
            action: What was refused, completing "cannot <action> <table_uri>", e.g. "write [ds=2024-01-01] of".
        """
        lease = self.lease
        shared = (
            "the whole table"
            if self.partitions is None
            else f"partitions {PartitionScope(lease.columns, self.partitions).describe(_SHOWN_PARTITIONS)}"
        )
        if lease.parked:
            fix = (
                f"backfill {lease.holder} stopped with staged, unpublished data of them: publish it "
                f"(`partition-assets backfill publish {lease.holder}`), resume it "
                f"(`partition-assets backfill resume {lease.holder}`) or discard it "
                f"(`partition-assets backfill discard {lease.holder}`)"
            )
        elif lease.kind == "backfill":
            fix = (
                f"watch it with `partition-assets backfill status {lease.holder}`, stop it with "
                f"`partition-assets backfill cancel {lease.holder}`, or wait for it to publish"
            )
        else:
            fix = f"wait for run {lease.holder} to finish, then try again"
        return PartitionLeasedError(
            f"cannot {action} {table_uri}: {lease.kind} {lease.holder} holds a lease on {shared}; {fix}. "
            "Nothing was written."
        )


def acquire(table_uri: str, holder: str, kind: LeaseKind, scope: PartitionScope | None) -> Lease:
    """Leases `scope`'s partitions of the table (None: the whole table) to `holder`.

    Acquiring again as the same holder (a resumed backfill) replaces its lease with this
    scope and a fresh heartbeat. Dead leases are ignored (and left in place: deleting one
    could delete the fresh lease its holder just wrote).

    Raises:
        PartitionLeasedError: A live lease of another holder overlaps, or the race with a
            concurrent acquirer of overlapping partitions was lost; the message names the other
            holder and how to proceed.
        StateFormatError: A lease of the table is in a newer release's format; nothing was written.
        EnvironmentSetupError: PARTITION_ASSETS_LEASE_TTL is set but not a positive number.
    """
    claim = _Claim.of(scope)
    folder = _LeaseFolder(table_uri)
    action = f"lease {scope.describe() if scope else 'the whole table'} of"
    for _ in range(_RACE_ROUNDS):
        overlap = folder.live_overlap(holder, claim)
        if overlap is not None:
            raise overlap.error(table_uri, action)
        now = time.time()
        own = folder.read(holder)
        acquired_at = own.acquired_at if own is not None and own.is_live(now) else now
        lease = Lease(table_uri, holder, kind, claim.columns, claim.partitions, acquired_at, now)
        folder.write(lease)
        if folder.live_overlap(holder, claim) is None:
            return lease
        # A concurrent acquirer wrote an overlapping lease: both back off and look again,
        # at random moments, so that one of them soon finds the other's lease in place.
        folder.delete(holder)
        time.sleep(random.uniform(0.01, 0.1))
    raise PartitionLeasedError(
        f"cannot {action} {table_uri} for {kind} {holder}: it raced other acquirers of the same partitions "
        f"{_RACE_ROUNDS} times; try again. Nothing was written."
    )


def check_write(table_uri: str, scope: PartitionScope | None, holder: str | None) -> None:
    """Raises PartitionLeasedError when a live lease of a holder other than `holder`
    overlaps `scope` (None: the whole table). One listing when the table has no lease.

    Args:
        holder: The writer's own lease holder (the backfill it writes for), whose lease is not
            in its way; None for a writer that holds none.

    Raises:
        PartitionLeasedError: A live lease of another holder overlaps `scope`.
        StateFormatError: A lease of the table is in a newer release's format.
        EnvironmentSetupError: PARTITION_ASSETS_LEASE_TTL is set but not a positive number.
    """
    overlap = _LeaseFolder(table_uri).live_overlap(holder, _Claim.of(scope))
    if overlap is not None:
        raise overlap.error(table_uri, f"write {scope.describe() if scope else 'the whole table'} of")


def release(leases: Lease | Iterable[Lease]) -> None:
    """Deletes each holder's lease on its table; nothing for one that is gone already.
    A heartbeat of this process stops refreshing them first, so none is written again."""
    released = [leases] if isinstance(leases, Lease) else list(leases)
    _stop_refreshing(released)
    for lease in released:
        _LeaseFolder(lease.table_uri).delete(lease.holder)


def park(leases: Iterable[Lease]) -> None:
    """Keeps each lease without a heartbeat until its holder releases it (see the module
    docstring); a lease released or taken over meanwhile is left alone. A heartbeat of
    this process stops refreshing them first, so none is written back unparked.

    Raises:
        EnvironmentSetupError: PARTITION_ASSETS_LEASE_TTL is set but not a positive number.
    """
    parked = list(leases)
    _stop_refreshing(parked)
    for lease in parked:
        folder = _LeaseFolder(lease.table_uri)
        current = folder.read(lease.holder)
        if current is not None and current.is_live():
            folder.write(replace(current, parked=True))


def held_by(table_uri: str, holder: str) -> list[Lease]:
    """The holder's lease on the table, live or parked ([] when it holds none).

    Raises:
        EnvironmentSetupError: PARTITION_ASSETS_LEASE_TTL is set but not a positive number.
    """
    return [lease for lease in leases(table_uri) if lease.holder == holder]


def leases(table_uri: str) -> list[Lease]:
    """The live leases of the table, oldest first.

    Raises:
        StateFormatError: A lease of the table is in a newer release's format.
        EnvironmentSetupError: PARTITION_ASSETS_LEASE_TTL is set but not a positive number.
    """
    now = time.time()
    return [lease for lease in _LeaseFolder(table_uri).all() if lease.is_live(now)]


def refresh(lease: Lease) -> bool:
    """Renews the heartbeat of the holder's lease; False, changing nothing, when the lease
    was released, or died and may have been taken over (its holder lost it), or was taken over
    in a newer release's format (the holder's backfill resumed by a newer coordinator).

    Raises:
        EnvironmentSetupError: PARTITION_ASSETS_LEASE_TTL is set but not a positive number.
    """
    folder = _LeaseFolder(lease.table_uri)
    try:
        current = folder.read(lease.holder)
    except StateFormatError:
        return False
    if current is None or not current.is_live():
        return False
    folder.write(replace(current, heartbeat_at=time.time()))
    return True


class Heartbeat:
    """Keeps `leases` alive while the block runs: a daemon thread refreshes them every
    `interval` seconds (default a quarter of the TTL) and stops on exit.

    A lease found released or dead is no longer refreshed and is listed in `lost`; so is
    every lease when the thread itself went longer than the TTL without a beat (its
    process was paused, or starved): the lease may have been taken over meanwhile, even
    if the refresh that was under way when the pause began writes it back later.
    `park` and `release` stop refreshing the leases they are given before they write,
    so a refresh under way never undoes them (they wait for it).

    Raises:
        EnvironmentSetupError: PARTITION_ASSETS_LEASE_TTL is set but not a positive number.
    """

    def __init__(self, leases: Sequence[Lease], interval: float | None = None) -> None:
        self.leases = list(leases)
        self.ttl = lease_ttl()
        self.interval = interval if interval is not None else self.ttl / 4
        self.lost: list[Lease] = []
        self._lock = threading.Lock()  # held by each round of refreshes, and to stop refreshing a lease
        self._last_beat = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lease-heartbeat", daemon=True)

    def __enter__(self) -> Heartbeat:
        with _BEATING_LOCK:
            _BEATING.add(self)
        self._last_beat = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()
        with _BEATING_LOCK:
            _BEATING.discard(self)

    def lapsed(self) -> list[Lease]:
        """The leases this heartbeat lost so far (see the class docstring), checked now."""
        with self._lock:
            self._check_pause()
            return list(self.lost)

    def forget(self, leases: Iterable[Lease]) -> None:
        """Stops refreshing `leases` (by table and holder), once a refresh under way is done."""
        keys = {(lease.table_uri, lease.holder) for lease in leases}
        with self._lock:
            self.leases = [lease for lease in self.leases if (lease.table_uri, lease.holder) not in keys]

    def _check_pause(self) -> None:
        if self.leases and time.monotonic() - self._last_beat >= self.ttl:
            self.lost += self.leases
            self.leases = []

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            with self._lock:
                self._check_pause()
                for lease in list(self.leases):
                    try:
                        alive = refresh(lease)
                    except OSError as error:  # a storage hiccup: the next beat tries again
                        log.warning("could not refresh the lease of %s on %s: %s", lease.holder, lease.table_uri, error)
                        continue
                    if not alive:
                        self.leases.remove(lease)
                        self.lost.append(lease)
                self._last_beat = time.monotonic()


# The heartbeats running in this process: `park` and `release` stop them refreshing a lease first.
_BEATING: set[Heartbeat] = set()
_BEATING_LOCK = threading.Lock()


def _stop_refreshing(leases: Sequence[Lease]) -> None:
    with _BEATING_LOCK:
        beating = list(_BEATING)
    for heartbeat in beating:
        heartbeat.forget(leases)


@contextmanager
def run_lease(table_uri: str, scope: PartitionScope | None, run_id: str) -> Iterator[Lease]:
    """A "run" lease on `scope` for the duration of one write, heartbeating meanwhile and
    released at the end, even on error. PartitionLeasedError (nothing written) when a
    backfill or another run holds an overlapping lease.

    Raises:
        PartitionLeasedError: A backfill or another run holds an overlapping lease.
        EnvironmentSetupError: PARTITION_ASSETS_LEASE_TTL is set but not a positive number.
    """
    lease = acquire(table_uri, run_id, "run", scope)
    try:
        with Heartbeat([lease]):
            yield lease
    finally:
        release(lease)


@dataclass(frozen=True)
class _Claim:
    columns: tuple[str, ...]
    partitions: frozenset[tuple[str, ...]] | None

    @classmethod
    def of(cls, scope: PartitionScope | None) -> _Claim:
        return cls((), None) if scope is None else cls(scope.columns, scope.rows)


class _LeaseFolder:
    """The `_leases` folder of one table, through its pyarrow filesystem."""

    def __init__(self, table_uri: str) -> None:
        self.table_uri = table_uri
        self.fs, root = table_filesystem(table_uri)
        self.folder = f"{root}/{LEASES_DIR}"

    def _path(self, holder: str) -> str:
        return f"{self.folder}/{self._file_name(holder)}"

    @staticmethod
    def _file_name(holder: str) -> str:
        return f"{urllib.parse.quote(holder, safe='')}.json"

    def all(self, but: str | None = None) -> list[Lease]:
        """Every lease file, live or dead, oldest first, but holder `but`'s (not even read);
        one listing when there is none."""
        selector = pafs.FileSelector(self.folder, allow_not_found=True)
        try:
            listing = self.fs.get_file_info(selector)
        except FileNotFoundError:
            # Arrow lists, and on ENOENT checks that the folder is missing: another process creating
            # it in between makes that check fail with the listing's error. The folder exists now.
            listing = self.fs.get_file_info(selector)
        skipped = None if but is None else self._file_name(but)
        found = [
            lease
            for info in listing
            if info.type == pafs.FileType.File and info.base_name.endswith(".json") and info.base_name != skipped
            for lease in [self._load(info.path)]
            if lease is not None
        ]
        return sorted(found, key=lambda lease: (lease.acquired_at, lease.holder))

    def read(self, holder: str) -> Lease | None:
        return self._load(self._path(holder))

    def write(self, lease: Lease) -> None:
        self.fs.create_dir(self.folder, recursive=True)
        temporary = f"{self.folder}/.{uuid.uuid4().hex}.tmp"  # not *.json: listings skip it
        body = {
            FORMAT_FIELD: LEASE_FORMAT,
            "holder": lease.holder,
            "kind": lease.kind,
            "columns": list(lease.columns),
            "partitions": None if lease.partitions is None else sorted(list(row) for row in lease.partitions),
            "acquired_at": lease.acquired_at,
            "heartbeat_at": lease.heartbeat_at,
            "parked": lease.parked,
        }
        with self.fs.open_output_stream(temporary) as stream:
            stream.write(json.dumps(body).encode())
        self.fs.move(temporary, self._path(lease.holder))  # readers see the old lease or the new, never half

    def delete(self, holder: str) -> None:
        try:
            self.fs.delete_file(self._path(holder))
        except FileNotFoundError:  # released already
            pass

    def live_overlap(self, holder: str | None, claim: _Claim) -> Overlap | None:
        """The oldest live lease of another holder that overlaps `claim`, with what they share."""
        now = time.time()
        # The holder's own lease is not read: a backfill's lists every partition it writes, and
        # each of its node runs checks its write here (3-5 ms a run for a year of hours).
        for lease in self.all(but=holder):
            if lease.is_live(now):
                overlap = lease.overlap(claim.columns, claim.partitions)
                if overlap is not None:
                    return overlap
        return None

    def _load(self, path: str) -> Lease | None:
        try:
            with self.fs.open_input_stream(path) as stream:
                body = json.loads(stream.read())
        except FileNotFoundError:  # released between the listing and now
            return None
        checked_format(body, LEASE_FORMAT, f"the lease of {body.get('holder', path)} on {self.table_uri} ({path})")
        partitions = body["partitions"]
        return Lease(
            table_uri=self.table_uri,
            holder=body["holder"],
            kind=body["kind"],
            columns=tuple(body["columns"]),
            partitions=None if partitions is None else frozenset(tuple(row) for row in partitions),
            acquired_at=body["acquired_at"],
            heartbeat_at=body["heartbeat_at"],
            parked=body.get("parked", False),
        )
