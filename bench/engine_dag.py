"""The 5-asset DAG of the engine benchmark; each partition sleeps 0.5-1 s (simulated work)."""

import time
import zlib

import dagster as dg

from partition_assets.partitions import daily, mappings, monthly

DAYS = daily("2024-01-01")


def work_seconds(asset: str, partition: str) -> float:
    """0.5-1 s, the same for a given (asset, partition) in every run."""
    return 0.5 + (zlib.crc32(f"{asset}/{partition}".encode()) % 501) / 1000


def _work(context: dg.AssetExecutionContext) -> None:
    time.sleep(work_seconds(context.asset_key.to_user_string(), context.partition_key))


@dg.asset(partitions_def=DAYS)
def raw(context: dg.AssetExecutionContext) -> None:
    _work(context)


@dg.asset(partitions_def=DAYS, deps=[dg.AssetDep("raw", partition_mapping=mappings.identity())])
def clean(context: dg.AssetExecutionContext) -> None:
    _work(context)


@dg.asset(partitions_def=DAYS, deps=[dg.AssetDep("clean", partition_mapping=mappings.rolling_window(7))])
def rolling_7d(context: dg.AssetExecutionContext) -> None:
    _work(context)


@dg.asset(
    partitions_def=DAYS,
    deps=[
        dg.AssetDep("clean", partition_mapping=mappings.identity()),
        dg.AssetDep("running_total", partition_mapping=mappings.previous_period()),
    ],
)
def running_total(context: dg.AssetExecutionContext) -> None:
    _work(context)


@dg.asset(partitions_def=monthly("2024-01-01"), deps=[dg.AssetDep("clean", partition_mapping=mappings.fan_in())])
def monthly_summary(context: dg.AssetExecutionContext) -> None:
    _work(context)


defs = dg.Definitions(assets=[raw, clean, rolling_7d, running_total, monthly_summary])
