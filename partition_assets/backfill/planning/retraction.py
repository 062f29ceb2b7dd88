"""What a retract (`backfill retract`) removes: the selected partitions, every one of which must
be materialized, and, with `--downstream`, the materialized partitions derived from them. Without
`--downstream` a retract that would leave a materialized downstream partition reading removed
data is refused, naming it. Pure: the caller plans the graphs and reads the instance.

Not guaranteed: "materialized" is what the instance recorded when the caller read it; a run
materializing a downstream partition after that read is not seen.
"""

from __future__ import annotations

from collections.abc import Iterable

from partition_assets.backfill.model import Node
from partition_assets.backfill.planning.graph import BackfillGraph
from partition_assets.errors import DownstreamReadersError, NotMaterializedError

# Partitions a refusal names before "and N more".
SHOWN_IN_REFUSALS = 8


def retracted_nodes(
    selected: BackfillGraph, reach: BackfillGraph, materialized: set[Node], downstream: bool
) -> list[Node]:
    """The nodes a retract removes, in `reach`'s order (upstream first): every node of
    `selected` (the selection's partitions) and, with `downstream`, the nodes of `reach` (the
    selection planned with its downstream) that are `materialized`.

    Raises:
        NotMaterializedError: A node of `selected` is not `materialized`; nothing was written.
        DownstreamReadersError: Without `downstream`, a materialized node of `reach` outside
            `selected` reads a node of it; nothing was written.
    """
    chosen = set(selected.nodes())
    missing = [node for node in selected.nodes() if node not in materialized]
    if missing:
        raise NotMaterializedError(
            f"cannot retract {describe_nodes(missing)}: never materialized in the instance, so there is "
            "nothing to remove. Drop them from --keys/--start/--end (`partition-assets backfill plan` with the "
            "same selection lists the partitions it names). Nothing was written."
        )
    readers = [node for node in reach.nodes() if node not in chosen and node in materialized]
    if readers and not downstream:
        raise DownstreamReadersError(
            f"cannot retract {describe_nodes(selected.nodes())}: materialized downstream partitions still read "
            f"them: {describe_nodes(readers)}. Retract those too with --downstream, or retract them first. "
            "Nothing was written."
        )
    return [node for node in reach.nodes() if node in chosen or node in readers]


def describe_nodes(nodes: Iterable[Node]) -> str:
    """Nodes as `asset partition` text, the first SHOWN_IN_REFUSALS of them and how many more."""
    listed = list(nodes)
    text = ", ".join(f"{node.asset.to_user_string()} {node.partition}".rstrip() for node in listed[:SHOWN_IN_REFUSALS])
    more = len(listed) - SHOWN_IN_REFUSALS
    return text + (f" and {more} more" if more > 0 else "")
