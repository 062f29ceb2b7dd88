"""A subsettable multi-asset with asset checks: a blocking check that passes, and a warning
that fails; a downstream asset of both outputs. The checks read no input: a check taking a
partitioned asset as input loads every partition of it, in Dagster's runs too."""

import dagster as dg

DAYS = dg.DailyPartitionsDefinition("2024-01-01")


@dg.multi_asset(
    outs={"orders": dg.AssetOut(is_required=False), "refunds": dg.AssetOut(is_required=False)},
    partitions_def=DAYS,
    can_subset=True,
)
def order_feed(context: dg.AssetExecutionContext):
    """The day's order amounts and refund amounts."""
    day = int(context.partition_key[-2:])
    if dg.AssetKey("orders") in context.selected_asset_keys:
        yield dg.Output([10 * day, 20 * day, 5], output_name="orders")
    if dg.AssetKey("refunds") in context.selected_asset_keys:
        yield dg.Output([day], output_name="refunds")


@dg.asset(partitions_def=DAYS)
def net_revenue(orders: list[int], refunds: list[int]) -> int:
    return sum(orders) - sum(refunds)


@dg.asset_check(asset="orders", blocking=True)
def orders_are_positive() -> dg.AssetCheckResult:
    return dg.AssetCheckResult(passed=True, metadata={"rows": 3})


@dg.asset_check(asset="refunds")
def no_refunds() -> dg.AssetCheckResult:
    return dg.AssetCheckResult(passed=False, severity=dg.AssetCheckSeverity.WARN)


defs = dg.Definitions(assets=[order_feed, net_revenue], asset_checks=[orders_are_positive, no_refunds])
