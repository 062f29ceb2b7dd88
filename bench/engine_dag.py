"""The 5-asset DAG of the engine benchmark; each partition sleeps 0.5-1 s (simulated work).

ENGINE_DAG_BACKFILL_POLICY chooses the assets' backfill policy: `single_run` (the
default: a run may cover a range of partitions, which both Dagster and the engine's
batching use) or `none` (Dagster's default: one run per partition).
"""

import os
import time
import zlib

import dagster as dg

from partition_assets.partitions import daily, mappings, monthly

DAYS = daily("2024-01-01")


def work_seconds(asset: str, partition: str) -> float:
    """0.5-1 s, the same for a given (asset, partition) in every run."""
    return 0.5 + (zlib.crc32(f"{asset}/{partition}".encode()) % 501) / 1000


# ENGINE_DAG_BACKFILL_POLICY's values: the BackfillPolicy each gives every asset.
POLICIES = {"single_run": dg.BackfillPolicy.single_run(), "none": None}
POLICY = POLICIES[os.environ.get("ENGINE_DAG_BACKFILL_POLICY", "single_run")]


def _work(context: dg.AssetExecutionContext) -> None:
    """The same work whether a run covers one partition or a range of them."""
    asset = context.asset_key.to_user_string()
    time.sleep(sum(work_seconds(asset, key) for key in context.partition_keys))


def definitions(policy: dg.BackfillPolicy | None) -> dg.Definitions:
    """The five assets, each with backfill policy `policy` (a bench derives the runs a policy
    makes without setting ENGINE_DAG_BACKFILL_POLICY in its own process)."""

    @dg.asset(partitions_def=DAYS, backfill_policy=policy)
    def raw(context: dg.AssetExecutionContext) -> None:
        _work(context)

    @dg.asset(
        partitions_def=DAYS, backfill_policy=policy, deps=[dg.AssetDep("raw", partition_mapping=mappings.identity())]
    )
    def clean(context: dg.AssetExecutionContext) -> None:
        _work(context)

    @dg.asset(
        partitions_def=DAYS,
        backfill_policy=policy,
        deps=[dg.AssetDep("clean", partition_mapping=mappings.rolling_window(7))],
    )
    def rolling_7d(context: dg.AssetExecutionContext) -> None:
        _work(context)

    @dg.asset(
        partitions_def=DAYS,
        backfill_policy=policy,
        deps=[
            dg.AssetDep("clean", partition_mapping=mappings.identity()),
            dg.AssetDep("running_total", partition_mapping=mappings.previous_period()),
        ],
    )
    def running_total(context: dg.AssetExecutionContext) -> None:
        _work(context)

    @dg.asset(
        partitions_def=monthly("2024-01-01"),
        backfill_policy=policy,
        deps=[dg.AssetDep("clean", partition_mapping=mappings.fan_in())],
    )
    def monthly_summary(context: dg.AssetExecutionContext) -> None:
        _work(context)

    return dg.Definitions(assets=[raw, clean, rolling_7d, running_total, monthly_summary])


defs = definitions(POLICY)
