"""What a rollback restores besides rows: the provenance of each partition's content before
the backfill (or retract) replaced it, so that the materialization the rollback records says
which commit and code version made that content (`--produced-by`, `--stale` read them).

It is taken from the originals (originals.py) when the backfill starts, before anything
replaces them, and kept in its record grouped by (commit, code version, runtime): a
backfill of 9,125 nodes made by one deploy keeps one group per asset, not 9,125 objects.

Not guaranteed: the input versions the originals read are not kept (they differ per
partition); a restored partition's materialization records none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import dagster as dg

from partition_assets.backfill.model import Node
from partition_assets.backfill.publishing.originals import Original

# asset -> its groups, as a backfill's record keeps them: each {"git_sha", "code_version",
# "runtime", "partitions"}, the partitions whose originals that commit, code version and runtime made
Provenance = dict[str, list[dict]]


def provenance_to_json(found: Mapping[Node, Original]) -> Provenance:
    """The commit, code version and runtime of each of `found`, grouped per asset by the three
    (groups in order of first appearance, partitions in `found`'s order)."""
    grouped: dict[str, dict[tuple, dict]] = {}
    for node, original in found.items():
        runtime = dict(sorted(original.runtime.items()))
        key = (original.git_sha, original.code_version, tuple(runtime.items()))
        groups = grouped.setdefault(node.asset.to_user_string(), {})
        if key not in groups:
            groups[key] = {
                "git_sha": original.git_sha,
                "code_version": original.code_version,
                "runtime": runtime,
                "partitions": [],
            }
        groups[key]["partitions"].append(node.partition)
    return {asset: list(groups.values()) for asset, groups in grouped.items()}


def provenance_from_json(saved: Mapping[str, Sequence[Mapping]] | None) -> dict[Node, Original]:
    """The inverse of `provenance_to_json` (input versions aside); {} for None, what records
    of earlier releases hold: nothing is known of their originals."""
    restored: dict[Node, Original] = {}
    for asset, groups in (saved or {}).items():
        key = dg.AssetKey.from_user_string(asset)
        for group in groups:
            original = Original(
                runtime=dict(group.get("runtime") or {}),
                git_sha=group.get("git_sha"),
                code_version=group.get("code_version"),
            )
            for partition in group["partitions"]:
                restored[Node(key, partition)] = original
    return restored
