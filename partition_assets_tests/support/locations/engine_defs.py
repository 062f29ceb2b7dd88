"""A code location for the engine tests: sleeps stand in for work; no storage."""

import time

import dagster as dg

from partition_assets.partitions import daily, mappings, monthly

DAYS = daily("2024-01-01")
FAILING_PARTITION = "2024-01-04"


def _work(partition_key: str, base: float = 0.2) -> None:
    # Slow and fast partitions interleave, so downstream nodes can start early.
    time.sleep(base + 0.4 * (int(partition_key[-2:]) % 2))


@dg.asset(partitions_def=DAYS)
def raw(context: dg.AssetExecutionContext) -> None:
    _work(context.partition_key)


@dg.asset(partitions_def=DAYS, deps=[dg.AssetDep("raw", partition_mapping=mappings.identity())])
def clean(context: dg.AssetExecutionContext) -> None:
    _work(context.partition_key, 0.1)


@dg.asset(partitions_def=DAYS, deps=[dg.AssetDep("clean", partition_mapping=mappings.rolling_window(3))])
def rolling(context: dg.AssetExecutionContext) -> None:
    _work(context.partition_key, 0.1)


@dg.asset(
    partitions_def=DAYS,
    deps=[
        dg.AssetDep("clean", partition_mapping=mappings.identity()),
        dg.AssetDep("total", partition_mapping=mappings.previous_period()),
    ],
)
def total(context: dg.AssetExecutionContext) -> None:
    time.sleep(0.05)


@dg.asset(
    partitions_def=DAYS,
    backfill_policy=dg.BackfillPolicy.single_run(),  # its code handles a range: the engine may batch it
    deps=[
        dg.AssetDep("clean", partition_mapping=mappings.identity()),
        dg.AssetDep("ledger", partition_mapping=mappings.previous_period()),
    ],
)
def ledger(context: dg.AssetExecutionContext) -> None:
    time.sleep(0.05 * len(context.partition_keys))


@dg.asset(partitions_def=DAYS, backfill_policy=dg.BackfillPolicy.single_run())
def wide(context: dg.AssetExecutionContext) -> None:
    time.sleep(0.05 * len(context.partition_keys))


@dg.asset(
    partitions_def=DAYS,
    backfill_policy=dg.BackfillPolicy.single_run(),
    deps=[dg.AssetDep("balance", partition_mapping=mappings.previous_period())],
)
def balance(context: dg.AssetExecutionContext) -> None:
    """Each day needs the day before: the engine runs a range of it as one run, whatever it knows of its duration."""
    time.sleep(0.05 * len(context.partition_keys))


@dg.asset(partitions_def=monthly("2024-01-01"), deps=[dg.AssetDep("clean", partition_mapping=mappings.fan_in())])
def month(context: dg.AssetExecutionContext) -> None:
    time.sleep(0.05)


@dg.asset(partitions_def=DAYS, deps=[dg.AssetDep("raw", partition_mapping=mappings.identity())])
def flaky(context: dg.AssetExecutionContext) -> None:
    if context.partition_key == FAILING_PARTITION:
        raise RuntimeError(f"flaky fails on {FAILING_PARTITION}")


@dg.asset(partitions_def=DAYS, deps=[dg.AssetDep("flaky", partition_mapping=mappings.rolling_window(2))])
def after_flaky(context: dg.AssetExecutionContext) -> None:
    pass


defs = dg.Definitions(assets=[raw, clean, rolling, total, ledger, wide, balance, month, flaky, after_flaky])
