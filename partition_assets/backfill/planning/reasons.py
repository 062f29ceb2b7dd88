"""Why each node is in a plan that the instance's history picks (`--produced-by`, `--stale`):
one typed `Reason` per (asset, partition), the rules that give them, and their counts.

The rules are pure: they take each partition's latest materialization as `Materialized` (what
history.py reads from the instance) and return the partitions they select with their
reason. A partition selected by several rules keeps the first: produced by, then code
version changed, then upstream re-materialized, then missing. A node that only
`downstream` adds is "downstream of" the selected assets it reads, directly or not.

Not guaranteed: "upstream re-materialized" compares event storage ids (the upstream
partition's latest materialization came after the partition's own), which is what the
partition read unless its run pinned older inputs (`--inputs-as-of`); a self-dependency
(a partition reading the asset's earlier ones) is not judged.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, NamedTuple, Protocol

import dagster as dg
import numpy as np

from partition_assets.backfill.model import Node

if TYPE_CHECKING:
    from partition_assets.backfill.planning.edges import Dependency
    from partition_assets.backfill.planning.graph import BackfillGraph

SHORT_SHA = 7  # characters of a commit a reason shows, as `git log --oneline`


class ReasonKind(StrEnum):
    PRODUCED_BY = "produced_by"
    CODE_VERSION_CHANGED = "code_version_changed"
    UPSTREAM_REMATERIALIZED = "upstream_rematerialized"
    MISSING = "missing"
    DOWNSTREAM = "downstream"


@dataclass(frozen=True)
class Reason:
    """Why one node is in the plan; `detail` is the commit, the upstream (asset partition) re-made,
    or the selected assets a downstream node reads ("" for the others)."""

    kind: ReasonKind
    detail: str = ""

    def text(self) -> str:
        """The reason as `backfill plan` prints it, e.g. 'produced by 3f2a1c9'."""
        return {
            ReasonKind.PRODUCED_BY: f"produced by {self.detail}",
            ReasonKind.CODE_VERSION_CHANGED: "code version changed",
            ReasonKind.UPSTREAM_REMATERIALIZED: f"upstream {self.detail} re-materialized",
            ReasonKind.MISSING: "missing",
            ReasonKind.DOWNSTREAM: f"downstream of {self.detail}",
        }[self.kind]


# asset -> partition -> why it is in the plan
NodeReasons = dict[dg.AssetKey, dict[str, Reason]]


class Materialized(Protocol):
    """The latest materialization of one partition, as the rules read it: a row of the
    provenance index as it is (dagster_instance/provenance_index.Provenance: a plan reads
    hundreds of thousands, not copied) or a `Made`."""

    @property
    def storage_id(self) -> int: ...
    @property
    def git_sha(self) -> str | None: ...  # the commit that made it (metadata, else its run's tag); None when unrecorded
    @property
    def code_version(self) -> str | None: ...


class Made(NamedTuple):
    """A `Materialized` read from the event log (history.scanned_materializations)."""

    storage_id: int
    git_sha: str | None
    code_version: str | None


def produced_by(
    partitions: Sequence[str],
    latest: Mapping[str, Materialized],
    commits: frozenset[str],
    versions_of_commits: Callable[[], frozenset[str]],
) -> dict[str, Reason]:
    """The partitions whose latest materialization one of `commits` made: its recorded commit,
    or, when it records none, a code version `versions_of_commits()` lists (the versions those
    commits' source gives the asset; asked only then)."""
    found: dict[str, Reason] = {}
    shared = _SharedReasons(ReasonKind.PRODUCED_BY)
    versions: frozenset[str] | None = None
    for partition in partitions:
        made = latest.get(partition)
        if made is None:
            continue
        if made.git_sha is not None:
            if made.git_sha in commits:
                found[partition] = shared.of(made.git_sha[:SHORT_SHA])
            continue
        if versions is None:
            versions = versions_of_commits()
        if made.code_version is not None and made.code_version in versions:
            found[partition] = shared.of(f"code version {made.code_version}")
    return found


class _SharedReasons:
    """One Reason of `kind` per distinct detail, not one per partition (a plan may hold 100,000)."""

    def __init__(self, kind: ReasonKind) -> None:
        self._kind = kind
        self._by_detail: dict[str, Reason] = {}

    def of(self, detail: str) -> Reason:
        if detail not in self._by_detail:
            self._by_detail[detail] = Reason(self._kind, detail)
        return self._by_detail[detail]


@dataclass(frozen=True)
class UpstreamMade:
    """An upstream asset's partitions the rules compare with: the dependency from the candidate
    partitions to `partitions`, and each one's latest materialization storage id (-1: never)."""

    name: str
    dependency: Dependency
    partitions: Sequence[str]
    storage_ids: np.ndarray


def stale(
    partitions: Sequence[str],
    latest: Mapping[str, Materialized],
    current_version: str,
    upstreams: Sequence[UpstreamMade],
) -> dict[str, Reason]:
    """The stale partitions of `partitions` (an asset's candidates, in order): never made; made
    with a code version other than `current_version`; or made before the latest materialization
    of an upstream partition they read (the first such upstream names the reason)."""
    found: dict[str, Reason] = {}
    missing, changed = Reason(ReasonKind.MISSING), Reason(ReasonKind.CODE_VERSION_CHANGED)
    shared = _SharedReasons(ReasonKind.UPSTREAM_REMATERIALIZED)
    for index, partition in enumerate(partitions):
        made = latest.get(partition)
        if made is None:
            found[partition] = missing
        elif made.code_version != current_version:
            found[partition] = changed
        else:
            remade = _remade_upstream(index, made.storage_id, upstreams)
            if remade is not None:
                found[partition] = shared.of(remade)
    return found


def _remade_upstream(index: int, storage_id: int, upstreams: Sequence[UpstreamMade]) -> str | None:
    for upstream in upstreams:
        read = upstream.dependency.upstream_indexes(index)
        if len(read):
            later = read[upstream.storage_ids[read] > storage_id]
            if len(later):
                partition = upstream.partitions[int(later[0])]
                return f"{upstream.name} {partition}".rstrip()
    return None


def add_downstream_reasons(graph: BackfillGraph, reasons: NodeReasons) -> NodeReasons:
    """`reasons` plus, for each node of `graph` without one (what `downstream` added), 'downstream
    of' the selected assets it reads through the graph; every node in graph order."""
    if graph.node_count() == sum(len(by_partition) for by_partition in reasons.values()):  # none added
        return {key: {p: reasons[key][p] for p in graph.slices[key].partition_keys} for key in graph.slices}
    sources: dict[Node, frozenset[str]] = {}
    held: dict[frozenset[str], frozenset[str]] = {}  # each distinct set held once, not once per node
    downstream_of: dict[frozenset[str], Reason] = {}  # and its Reason
    complete: NodeReasons = {}
    for node in graph.nodes():  # topological: a node's upstream nodes come first
        own = reasons.get(node.asset, {}).get(node.partition)
        if own is not None:
            found = frozenset({node.asset.to_user_string()})
        else:
            found = frozenset().union(*(sources[u] for u in graph.upstream(node)))
            if found not in downstream_of:
                downstream_of[found] = Reason(ReasonKind.DOWNSTREAM, ", ".join(sorted(found)))
            own = downstream_of[found]
        sources[node] = held.setdefault(found, found)
        complete.setdefault(node.asset, {})[node.partition] = own
    return complete


def reason_counts(reasons: Mapping[str, Reason]) -> list[tuple[str, int]]:
    """How many partitions each reason (as text) selected, the most first."""
    return Counter(reason.text() for reason in reasons.values()).most_common()


def reason_lines(reasons: NodeReasons, shown: int = 4) -> list[str]:
    """A line per asset: how many partitions each reason selected (the `shown` most frequent,
    then how many other reasons), e.g. 'orders: 3 produced by 3f2a1c9, 1 missing'."""
    lines = []
    for key, by_partition in reasons.items():
        counts = reason_counts(by_partition)
        parts = [f"{count} {text}" for text, count in counts[:shown]]
        rest = sum(count for _, count in counts[shown:])
        if rest:
            parts.append(f"{rest} for {len(counts) - shown} other reasons")
        lines.append(f"{key.to_user_string()}: {', '.join(parts)}")
    return lines
