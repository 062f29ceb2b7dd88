"""Asset backfills launched from the webserver's "Materialize range" dialog, taken over by
the engine (`partition-assets backfill adopt|standby`) or handed back to Dagster's daemon.

- `specs_of_dagster_backfill` turns such a backfill into the `BackfillSpec`s whose plan may
  be its target partitions (its tag `partition_assets/approval` as their `approval`), or
  refuses (BackfillPlanError) when no spec states it.
- `adopted_plan` is the first of those specs whose graph is exactly the backfill's target,
  and that graph, from the first engine code location holding the backfill's assets; else
  BackfillPlanError, and the caller runs nothing and hands the backfill back
  (`hand_back`: tagged `partition_assets/engine=dagster`, the daemon's next tick runs it).
- `mark_failed` ends a Dagster backfill refused before the engine ran any node (leased
  partitions, say) as FAILED, with the refusal as its error.

Not guaranteed: a target of dynamic partitions, or one no time range and static filter
states (days 1 and 3 without day 2), is never adopted. Reads
`PartitionBackfill.get_asset_backfill_data(...).target_subset` and writes through
`DagsterInstance.update_backfill`; partition_assets_tests/integration/test_dagster_internals.py pins them
against the installed Dagster.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, cast

import dagster as dg

from partition_assets.backfill.dagster_ui.conversion import nodes_of
from partition_assets.backfill.model import ApprovalChoice
from partition_assets.backfill.planning.graph import BackfillGraph, plan
from partition_assets.backfill.planning.spec import RESERVED_TAG_PREFIXES, BackfillSpec, config_key_of
from partition_assets.backfill.state.approval import APPROVAL_TAG, SETTINGS_KEY, approval_policy
from partition_assets.code_location import load_definitions
from partition_assets.dagster_instance.daemon_filter import DAGSTER, ENGINE_TAG
from partition_assets.dagster_internals import BulkActionStatus, PartitionBackfill, SerializableErrorInfo
from partition_assets.errors import ApprovalError, BackfillPlanError

if TYPE_CHECKING:
    from partition_assets.dagster_internals import BaseAssetGraph


def specs_of_dagster_backfill(
    backfill: PartitionBackfill, asset_graph: BaseAssetGraph, module: str
) -> list[BackfillSpec]:
    """The specs that may plan `backfill`'s target: its assets, the static keys it targets,
    its own tags, and a time range: first the span of all its targeted windows, then the
    span of each time grain's windows, finest first (days 1-13 of a daily asset with the two
    weeks they touch of a weekly one: the weeks span 14 days, the days 13). BackfillPlanError
    says why there is none (dynamic partitions, an asset of another code location)."""
    target = backfill.get_asset_backfill_data(asset_graph).target_subset
    missing = sorted(key.to_user_string() for key in target.asset_keys if not asset_graph.has(key))
    if missing:
        raise BackfillPlanError(f"assets {missing} are not in code location {module}")
    spans: dict[timedelta, tuple[datetime, datetime]] = {}  # per window length: the span of its windows
    static: dict[str, set[str]] = {}
    for key in target.asset_keys:
        partitions_def = asset_graph.get(key).partitions_def
        if partitions_def is None:
            continue
        keys = list(target.get_partitions_subset(key).get_partition_keys())
        if isinstance(partitions_def, dg.MultiPartitionsDefinition):
            # A launch from the webserver holds a multi-partitioned asset's keys as their
            # strings ("2024-01-02|eu"), not as MultiPartitionKeys.
            by_dimension = [partitions_def.get_partition_key_from_str(k).keys_by_dimension for k in keys]
            dimensions = [
                (d.name, d.partitions_def, [k[d.name] for k in by_dimension]) for d in partitions_def.partitions_defs
            ]
        else:
            dimensions = [(key.to_user_string(), partitions_def, keys)]
        for name, dimension_def, values in dimensions:
            if isinstance(dimension_def, dg.TimeWindowPartitionsDefinition):
                windows = [dimension_def.time_window_for_partition_key(v) for v in set(values)]
                grain = min(w.end - w.start for w in windows)
                start, end = min(w.start for w in windows), max(w.end for w in windows)
                known = spans.get(grain, (start, end))
                spans[grain] = (min(start, known[0]), max(end, known[1]))
            elif isinstance(dimension_def, dg.StaticPartitionsDefinition):
                static.setdefault(name, set()).update(values)
            else:
                raise BackfillPlanError(
                    f"{key.to_user_string()} has {type(dimension_def).__name__} partitions: the engine takes a UI "
                    "backfill of time and static partitions only; Dagster's daemon runs this one"
                )
    whole = (min(s for s, _ in spans.values()), max(e for _, e in spans.values())) if spans else None
    ranges = list(dict.fromkeys([whole, *(spans[grain] for grain in sorted(spans))]))
    user_tags = {k: v for k, v in backfill.tags.items() if not k.startswith(RESERVED_TAG_PREFIXES)}
    return [
        BackfillSpec(
            module=module,
            selection=" or ".join(f'key:"{key.to_user_string()}"' for key in sorted(target.asset_keys)),
            start=span[0].isoformat() if span else None,
            end=(span[1] - timedelta(microseconds=1)).isoformat() if span else None,
            static={name: sorted(keys) for name, keys in static.items()},
            tags=user_tags,
            run_config=dict(backfill.run_config or {}),
            # The tag's word: the spec takes it as its ApprovalChoice, or refuses it naming it.
            approval=cast("ApprovalChoice | None", backfill.tags.get(APPROVAL_TAG)),
        )
        for span in ranges
    ]


def adopted_plan(
    backfill: PartitionBackfill, modules: Iterable[str], instance: dg.DagsterInstance
) -> tuple[BackfillSpec, BackfillGraph]:
    """The spec and graph of a UI-launched `backfill`, from the first of `modules` (code
    locations) that holds its assets and the first of its specs (specs_of_dagster_backfill)
    that plans exactly its target; BackfillPlanError when none does."""
    reasons = []
    for module in modules:
        asset_graph = load_definitions(module).resolve_asset_graph()
        try:
            specs = specs_of_dagster_backfill(backfill, asset_graph, module)
        except BackfillPlanError as error:
            reasons.append(f"{module}: {error}")
            continue
        target = nodes_of(backfill.get_asset_backfill_data(asset_graph).target_subset)
        for spec in specs:
            try:
                # The engine derived the spec: its fields go by their own names, as a recorded spec shows them.
                graph = plan(asset_graph, spec, dynamic_partitions_store=instance, wording=config_key_of)
            except BackfillPlanError as error:
                reasons.append(f"{module}: {error}")
                continue
            planned = set(graph.nodes())
            if planned == target:
                return spec, graph
            reasons.append(
                f"{module}: the spec {spec.describe()} plans {len(planned - target)} nodes outside the backfill's "
                f"target and misses {len(target - planned)} of it"
            )
        reasons[-1] += " (a target no time range and static filter states)"
    raise BackfillPlanError(
        f"backfill {backfill.backfill_id} is not one the engine can run exactly "
        f"({'; '.join(reasons) or 'no engine_modules'}): handed back to Dagster's daemon"
    )


def hand_back(instance: dg.DagsterInstance, backfill: PartitionBackfill) -> None:
    """Leaves `backfill` to Dagster's daemon (its next tick runs it); under an approval policy
    that requires approval (backfill/state/approval.py), marks it failed instead, since the
    daemon publishes without one.

    Raises:
        ApprovalError: The deployment requires approval; the backfill is marked failed, nothing ran.
    """
    policy = approval_policy(instance)
    if policy is not None and policy.required:
        refusal = ApprovalError(
            f"backfill {backfill.backfill_id} is not one the engine can run exactly, and this deployment requires "
            f"approval (dagster.yaml `partition_assets: {SETTINGS_KEY}:`): it is not handed to Dagster's daemon, "
            "which publishes without one. Launch a range the engine plans exactly (a time range, static "
            "filters), or `partition-assets backfill run`. Nothing was run."
        )
        mark_failed(instance, backfill.backfill_id, refusal)
        raise refusal
    instance.update_backfill(backfill._replace(tags={**backfill.tags, ENGINE_TAG: DAGSTER}))


def mark_failed(instance: dg.DagsterInstance, backfill_id: str, error: BaseException) -> None:
    """The Dagster backfill `backfill_id` failed before the engine ran any node; `error` says why."""
    backfill = instance.get_backfill(backfill_id)
    if backfill is not None:
        info = SerializableErrorInfo(message=str(error), stack=[], cls_name=type(error).__name__)
        instance.update_backfill(
            backfill.with_status(BulkActionStatus.FAILED).with_error(info).with_end_timestamp(time.time())
        )
