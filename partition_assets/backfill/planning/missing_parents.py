"""Parents that do not exist: a backfill whose partitions read parent partitions that their
parent's definition lacks (a May partition reading an asset that starts in June, a partition
after the end date of the asset it reads) is refused when it is planned, as Dagster's asset
backfill refuses it ("depends on non-existent partitions").

Every parent counts, inside the backfill or not, and each input's own partition mapping
answers (Dagster's `required_but_nonexistent_subset`): a mapping declared with
`allow_nonexistent_upstream_partitions=True` reads the parents that exist and is not refused.
An unpartitioned parent always exists.

Not guaranteed: a dynamic parent's partitions are those the instance holds when the plan is
made; one deleted later is found missing only when a node run reads it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import dagster as dg

from partition_assets.errors import MissingParentPartitionError

if TYPE_CHECKING:
    from partition_assets.backfill.planning.mapping_memo import MappingMemo
    from partition_assets.dagster_internals import BaseAssetGraph

# Keys a message shows of a longer list.
_SHOWN = 5


def refuse_missing_parents(
    asset_graph: BaseAssetGraph, keys_by_asset: Mapping[dg.AssetKey, Sequence[str]], memo: MappingMemo
) -> None:
    """Raise when a partition of `keys_by_asset` reads a parent partition that does not exist.

    Raises:
        MissingParentPartitionError: Naming, per asset and parent, the partitions that read missing
            ones, the missing ones, the parent's partitions, and the two fixes.
    """
    found = [
        f"{key.to_user_string()} {_shown(readers)} read{'s' if len(readers) == 1 else ''} "
        f"{parent.to_user_string()} {_shown(missing)}, {_absent_from(asset_graph.get(parent).partitions_def, memo)}"
        for key, keys in keys_by_asset.items()
        for parent, (readers, missing) in missing_parents(asset_graph, key, keys, memo).items()
    ]
    if found:
        raise MissingParentPartitionError(
            "partitions read parent partitions that do not exist (Dagster's backfill refuses them too: "
            f"'depends on non-existent partitions'): {'; '.join(found)}. Narrow the range or keys to partitions "
            "whose parents exist, or declare the input's mapping with allow_nonexistent_upstream_partitions=True "
            "if the asset runs without them; nothing was planned or written"
        )


def missing_parents(
    asset_graph: BaseAssetGraph, key: dg.AssetKey, keys: Sequence[str], memo: MappingMemo
) -> dict[dg.AssetKey, tuple[list[str], list[str]]]:
    """Per parent of asset `key` that lacks partitions some of `keys` (in partition order) read:
    those keys, and the partitions they read that it lacks; {} when every parent partition exists."""
    found: dict[dg.AssetKey, tuple[list[str], list[str]]] = {}
    if not keys:
        return found
    asset_def = asset_graph.get(key).partitions_def
    for parent in sorted(asset_graph.get(key).parent_keys):
        parent_def = asset_graph.get(parent).partitions_def
        if parent_def is None:
            continue
        mapping = asset_graph.get_partition_mapping(key, parent)
        if not memo.nonexistent_upstream_keys(mapping, asset_def, keys, parent_def):
            continue  # the usual answer, asked once for all the keys
        # Which keys read which missing partitions: asked key by key, on this path only
        # (time keys are asked as a span, which may hold keys that are not planned).
        by_key = {k: memo.nonexistent_upstream_keys(mapping, asset_def, (k,), parent_def) for k in keys}
        readers = [k for k, absent in by_key.items() if absent]
        if readers:
            found[parent] = (readers, list(dict.fromkeys(m for k in readers for m in by_key[k])))
    return found


def _shown(keys: Sequence[str]) -> str:
    listed = ", ".join(keys[:_SHOWN])
    return listed if len(keys) <= _SHOWN else f"{listed}, ... ({len(keys)} partitions)"


def _absent_from(partitions_def: dg.PartitionsDefinition | None, memo: MappingMemo) -> str:
    """Where the parent's partitions are: its first and last key."""
    assert partitions_def is not None, "only a partitioned parent lacks partitions"
    keys = partitions_def.get_partition_keys(dynamic_partitions_store=memo.store)
    return f"absent from its partitions {keys[0]}..{keys[-1]}" if keys else "absent: it has no partition yet"
