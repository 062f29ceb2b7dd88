"""What a spec selects in a code location, and why a selection plans nothing.

The selection is Dagster's selection syntax, resolved against the code location's asset
graph; the static filter must name static dimensions of the selected assets. Every
refusal is a BackfillPlanError naming the value, what it should be and, for names, the
close ones; spec fields are named as the caller's surface names them (`Wording`: flags
on the command line, config keys for the job). Nothing is planned or launched before
these checks pass.

Not guaranteed: the close names suggested are a string similarity over asset keys and
group names, not a check that they would plan anything.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import dagster as dg

from partition_assets.backfill.planning.spec import SELECTION_EXAMPLES, BackfillSpec, Wording
from partition_assets.dagster_betas import asset_selection
from partition_assets.errors import BackfillPlanError

if TYPE_CHECKING:  # Dagster's internal types, for annotations only
    from partition_assets.dagster_internals import BaseAssetGraph

# Words of the selection syntax, never asset names.
_SYNTAX_WORDS = {"key", "group", "tag", "owner", "kind", "and", "or", "not"}


def resolve_selection(asset_graph: BaseAssetGraph, selection: str) -> set[dg.AssetKey]:
    """The asset keys of a Dagster selection string; an error naming close names when it
    is invalid or matches nothing."""
    try:
        keys = asset_selection(selection).resolve(asset_graph)
    except dg.DagsterInvalidSubsetError:  # a bare key no asset has ('daily_ordrs'): named below, as `key:` is
        keys = set()
    except dg.DagsterError as error:
        raise BackfillPlanError(
            f"selection {selection!r} is not valid ({error}); use Dagster's selection syntax, {SELECTION_EXAMPLES}; "
            "nothing was written"
        ) from None
    if keys:
        return set(keys)
    names = sorted(key.to_user_string() for key in asset_graph.get_all_asset_keys())
    groups = sorted({asset_graph.get(key).group_name for key in asset_graph.get_all_asset_keys()} - {None})
    words = set(re.findall(r"[\w/.-]+", selection)) - _SYNTAX_WORDS
    close = sorted({match for word in words for match in difflib.get_close_matches(word, names + groups, n=3)})
    hint = f"close names: {close}" if close else f"its assets: {names[:12]}{' …' if len(names) > 12 else ''}"
    raise BackfillPlanError(
        f"selection {selection!r} matches no asset of the code location; {hint}; nothing was written"
    )


def check_static_filters(
    asset_graph: BaseAssetGraph,
    selected: set[dg.AssetKey],
    static_keys: Mapping[str, Sequence[str]],
    wording: Wording,
) -> None:
    """BackfillPlanError when the static filter names a dimension no selected asset has."""
    known = sorted({d for key in selected for d in _static_dimensions(key, asset_graph.get(key).partitions_def)})
    unknown = sorted(set(static_keys) - set(known))
    if unknown:
        raise BackfillPlanError(
            f"{wording('static')} names {unknown}, which is no static dimension of the selection; "
            + (f"its static dimensions: {known}" if known else "the selection has no static partitions")
        )


def _static_dimensions(key: dg.AssetKey, partitions_def: dg.PartitionsDefinition | None) -> list[str]:
    if isinstance(partitions_def, dg.StaticPartitionsDefinition):
        return [key.to_user_string()]
    if isinstance(partitions_def, dg.MultiPartitionsDefinition):
        return [
            d.name
            for d in partitions_def.partitions_defs
            if isinstance(d.partitions_def, dg.StaticPartitionsDefinition)
        ]
    return []


def why_empty(asset: str, partitions_def: dg.PartitionsDefinition | None, spec: BackfillSpec, wording: Wording) -> str:
    """Why `asset` contributes no partition to the plan of `spec`."""
    if isinstance(partitions_def, dg.MultiPartitionsDefinition):  # a static dimension never is empty
        for dimension in partitions_def.partitions_defs:
            if not isinstance(dimension.partitions_def, dg.StaticPartitionsDefinition):
                return why_empty(f"{asset} (dimension {dimension.name})", dimension.partitions_def, spec, wording)
    if isinstance(partitions_def, dg.DynamicPartitionsDefinition):
        return (
            f"asset {asset}: dynamic partitions {partitions_def.name!r} have no keys yet; add them with "
            f"instance.add_dynamic_partitions({partitions_def.name!r}, [...]), a sensor's "
            "DynamicPartitionsRequest, or the UI (the asset's Partitions tab)"
        )
    if isinstance(partitions_def, dg.TimeWindowPartitionsDefinition):
        first, last = partitions_def.get_first_partition_key(), partitions_def.get_last_partition_key()
        if first is None or last is None:
            return f"asset {asset} has no partitions yet (they start {partitions_def.start})"
        if spec.exact:
            exact = wording("exact")
            return (
                f"no partition of asset {asset} lies wholly inside {spec.start}..{spec.end} ({exact}); "
                f"widen the range or drop {exact}"
            )
        # Within the partitions' span, a range can still hold only excluded days (a weekend).
        time_range = spec.time_range()
        inside = (
            bool(partitions_def.exclusions)
            and time_range is not None
            and (
                time_range.start < partitions_def.end_time_for_partition_key(last)
                and time_range.end > partitions_def.start_time_for_partition_key(first)
            )
        )
        where = "holds only days its exclusions leave out" if inside else "lies outside them"
        return f"asset {asset}: its partitions run from {first} to {last}; the range {spec.start}..{spec.end} {where}"
    return f"asset {asset} has no partition in the plan"
