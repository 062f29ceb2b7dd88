"""A small lakehouse that exercises every partition kind and mapping.

events (hourly) ──fan-in──> events_6h (cron, every 6 hours)
    └──fan-in──> daily_orders (daily)
countries (static) ──static_to_static──> regions (static)
daily_orders + regions ──to_dimension──> daily_region_revenue (daily × region)
    └──per_dimension(rolling 7, identity)──> region_revenue_7d (daily × region)
daily_orders + regions (all) ──identity──> daily_revenue (daily)
    ├──rolling 7──> revenue_7d
    ├──identity + self (previous day)──> revenue_running_total
    ├──fan-in──> weekly_revenue, monthly_revenue
    ├── + monthly_targets ──fan-out──> daily_target_attainment
    └── + fx_rates (corrected in place outside Dagster) ──identity──> daily_revenue_eur
campaign_report (dynamic)
"""

from collections.abc import Callable
from functools import reduce

import dagster as dg
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from partition_assets import (
    Budget,
    SparkResource,
    backfill_approval,
    backfill_gate,
    cron,
    daily,
    dynamic,
    hourly,
    mappings,
    monthly,
    multi,
    static,
    weekly,
)
from partition_assets.example import sources

START = "2024-01-01"

HOURLY = hourly(f"{START}-00:00")
SIX_HOURLY = cron("0 */6 * * *", f"{START}-00:00")
DAILY = daily(START)
WEEKLY = weekly(START, day_offset=1)  # weeks start on Monday
MONTHLY = monthly(START)
COUNTRIES = static(sources.COUNTRIES)
REGIONS = static(sources.REGIONS)
DAILY_BY_REGION = multi(ds=DAILY, region=REGIONS)
CAMPAIGNS = dynamic("campaigns")

# One run covers a whole key range: the IO manager replaces the range in one commit.
RANGE_RUN = dg.BackfillPolicy.single_run()


def _keys_in(df: DataFrame, column: str, keys: list[str]) -> DataFrame:
    return df.filter(F.col(column).isin(keys))


def _day_number(column: str):
    return F.datediff(F.to_date(column), F.lit("1970-01-01"))


def _each_key(keys: list[str], frame_of_key: Callable[[str], DataFrame], column: str) -> DataFrame:
    """One frame per partition key, the key in `column`: a source generated key by key
    still covers a whole range in one run."""
    frames = [frame_of_key(key).withColumn(column, F.lit(key)) for key in keys]
    return reduce(DataFrame.unionByName, frames)


def _usd(revenue: Column, fx_to_usd: Column) -> Column:
    return F.round(revenue.cast("double") * fx_to_usd, 2)


@dg.asset(partitions_def=HOURLY, backfill_policy=RANGE_RUN, group_name="orders")
def events(context: dg.AssetExecutionContext, spark: SparkResource) -> DataFrame:
    """Raw order events, 24 an hour, generated from the hour's key."""
    window = context.partition_time_window
    hours = int((window.end - window.start).total_seconds() // 3600)
    return sources.hourly_events(spark.spark_session, window.start, hours)


@dg.asset(
    partitions_def=SIX_HOURLY,
    backfill_policy=RANGE_RUN,
    ins={"events": dg.AssetIn(partition_mapping=mappings.fan_in())},
    group_name="orders",
)
def events_6h(events: DataFrame) -> DataFrame:
    """Event count and revenue per 6-hour window (cron partitions)."""
    bucket = F.date_format(F.timestamp_seconds(F.floor(F.unix_seconds("event_ts") / 21600) * 21600), "yyyy-MM-dd-HH:mm")
    return events.groupBy(bucket.alias("ds")).agg(F.count("*").alias("events"), F.sum("amount").alias("revenue"))


@dg.asset(
    partitions_def=COUNTRIES,
    backfill_policy=RANGE_RUN,
    metadata={"partition_column": "country"},
    group_name="reference",
)
def countries(context: dg.AssetExecutionContext, spark: SparkResource) -> DataFrame:
    """Country attributes (static partitions, one per country)."""
    return sources.country_attributes(spark.spark_session, context.partition_keys)


@dg.asset(
    partitions_def=REGIONS,
    backfill_policy=RANGE_RUN,
    metadata={"partition_column": "region"},
    ins={"countries": dg.AssetIn(partition_mapping=mappings.static_to_static(sources.REGION_OF_COUNTRY))},
    group_name="reference",
)
def regions(countries: DataFrame) -> DataFrame:
    """Regions rolled up from their countries (static -> static mapping)."""
    return countries.groupBy("region").agg(
        F.count("*").alias("countries"),
        F.sum("population_m").alias("population_m"),
        F.round(F.avg("fx_to_usd"), 3).alias("fx_to_usd"),
    )


@dg.asset(
    partitions_def=DAILY,
    backfill_policy=RANGE_RUN,
    ins={"events": dg.AssetIn(partition_mapping=mappings.fan_in())},
    group_name="orders",
    # A backfill's day may move its orders by 5 % and its revenue by 1 %; one row per region.
    metadata=backfill_gate(row_change=0.05, measures={"revenue": Budget(relative=0.01)}, keys=["region"]),
)
def daily_orders(events: DataFrame) -> DataFrame:
    """Orders and revenue per day and region (hourly -> daily fan-in)."""
    region = F.create_map(*[F.lit(x) for pair in sources.REGION_OF_COUNTRY.items() for x in pair])
    return events.groupBy(
        F.date_format("event_ts", "yyyy-MM-dd").alias("ds"), region[F.col("country")].alias("region")
    ).agg(F.count("*").alias("orders"), F.sum("amount").alias("revenue"))


@dg.asset(
    partitions_def=DAILY_BY_REGION,
    backfill_policy=RANGE_RUN,
    ins={
        "daily_orders": dg.AssetIn(partition_mapping=mappings.to_dimension("ds")),
        "regions": dg.AssetIn(partition_mapping=mappings.to_dimension("region")),
    },
    group_name="revenue",
)
def daily_region_revenue(daily_orders: DataFrame, regions: DataFrame) -> DataFrame:
    """Revenue in USD per (day, region): a multi-partitioned asset."""
    return daily_orders.join(regions.select("region", "fx_to_usd"), "region").select(
        "ds",
        "region",
        "orders",
        _usd(F.col("revenue"), F.col("fx_to_usd")).alias("revenue_usd"),
    )


@dg.asset(
    partitions_def=DAILY_BY_REGION,
    backfill_policy=RANGE_RUN,
    ins={
        "daily_region_revenue": dg.AssetIn(
            partition_mapping=mappings.per_dimension(ds=mappings.rolling_window(7), region=mappings.identity())
        )
    },
    group_name="revenue",
)
def region_revenue_7d(context: dg.AssetExecutionContext, daily_region_revenue: DataFrame) -> DataFrame:
    """7-day revenue per region (a per-dimension mapping: rolling on ds, identity on region)."""
    window = Window.partitionBy("region").orderBy(_day_number("ds")).rangeBetween(-6, 0)
    rolled = daily_region_revenue.select(
        "ds",
        "region",
        F.sum("revenue_usd").over(window).alias("revenue_usd_7d"),
        F.count("*").over(window).alias("days_in_window"),
    )
    # The input starts 6 days early; keep the run's keys ("ds|region", dimensions by name).
    keyed = rolled.withColumn("key", F.concat_ws("|", "ds", "region"))
    return _keys_in(keyed, "key", context.partition_keys).drop("key")


@dg.asset(
    partitions_def=DAILY,
    backfill_policy=RANGE_RUN,
    ins={
        "daily_orders": dg.AssetIn(partition_mapping=mappings.identity()),
        "regions": dg.AssetIn(partition_mapping=mappings.all_partitions()),
    },
    group_name="revenue",
    # The finance table: a backfill may not change a day's USD revenue by more than 1 %.
    metadata=backfill_gate(row_change=0.0, measures={"revenue_usd": Budget(relative=0.01)}, keys=["ds"]),
)
def daily_revenue(daily_orders: DataFrame, regions: DataFrame) -> DataFrame:
    """Revenue in USD per day over all regions (the region table is read whole)."""
    return (
        daily_orders.join(regions.select("region", "fx_to_usd"), "region")
        .groupBy("ds")
        .agg(
            F.sum("orders").alias("orders"),
            F.round(F.sum(_usd(F.col("revenue"), F.col("fx_to_usd"))), 2).alias("revenue_usd"),
        )
    )


@dg.asset(
    partitions_def=DAILY,
    backfill_policy=RANGE_RUN,
    ins={"daily_revenue": dg.AssetIn(partition_mapping=mappings.rolling_window(7))},
    group_name="revenue",
)
def revenue_7d(context: dg.AssetExecutionContext, daily_revenue: DataFrame) -> DataFrame:
    """Revenue over the 7 days ending at each day (reads D-6..D)."""
    window = Window.orderBy(_day_number("ds")).rangeBetween(-6, 0)
    rolled = daily_revenue.select(
        "ds",
        F.round(F.sum("revenue_usd").over(window), 2).alias("revenue_usd_7d"),
        F.count("*").over(window).alias("days_in_window"),
    )
    return _keys_in(rolled, "ds", context.partition_keys)


@dg.asset(
    partitions_def=DAILY,
    backfill_policy=RANGE_RUN,
    ins={
        "daily_revenue": dg.AssetIn(partition_mapping=mappings.identity()),
        "previous": mappings.self_dependency("revenue_running_total"),
    },
    group_name="revenue",
)
def revenue_running_total(
    context: dg.AssetExecutionContext, daily_revenue: DataFrame, previous: DataFrame | None
) -> DataFrame:
    """Cumulative revenue since the first day: yesterday's total plus today's revenue."""
    first_day = context.partition_keys[0]
    carried = F.lit(0.0)
    if previous is not None:
        day_before = previous.filter(F.col("ds") < first_day).select(F.col("running_total_usd").alias("carried"))
        daily_revenue = daily_revenue.crossJoin(day_before)
        carried = F.col("carried")
    cumulative = F.sum("revenue_usd").over(Window.orderBy("ds").rowsBetween(Window.unboundedPreceding, 0))
    return daily_revenue.select("ds", F.round(carried + cumulative, 2).alias("running_total_usd"))


@dg.asset(
    partitions_def=WEEKLY,
    backfill_policy=RANGE_RUN,
    ins={"daily_revenue": dg.AssetIn(partition_mapping=mappings.fan_in())},
    group_name="revenue",
)
def weekly_revenue(daily_revenue: DataFrame) -> DataFrame:
    """Revenue per Monday-to-Sunday week (daily -> weekly fan-in)."""
    week = F.date_format(F.date_trunc("week", F.to_date("ds")), "yyyy-MM-dd")
    return daily_revenue.groupBy(week.alias("ds")).agg(
        F.round(F.sum("revenue_usd"), 2).alias("revenue_usd"), F.count("*").alias("days")
    )


@dg.asset(
    partitions_def=MONTHLY,
    backfill_policy=RANGE_RUN,
    ins={"daily_revenue": dg.AssetIn(partition_mapping=mappings.fan_in())},
    group_name="revenue",
)
def monthly_revenue(daily_revenue: DataFrame) -> DataFrame:
    """Revenue per month (daily -> monthly fan-in)."""
    month = F.date_format(F.trunc(F.to_date("ds"), "month"), "yyyy-MM-dd")
    return daily_revenue.groupBy(month.alias("ds")).agg(
        F.round(F.sum("revenue_usd"), 2).alias("revenue_usd"), F.count("*").alias("days")
    )


@dg.asset(partitions_def=MONTHLY, backfill_policy=RANGE_RUN, group_name="planning")
def monthly_targets(context: dg.AssetExecutionContext, spark: SparkResource) -> DataFrame:
    """Each month's revenue target."""
    return _each_key(context.partition_keys, lambda month: sources.monthly_target(spark.spark_session, month), "ds")


@dg.asset(
    partitions_def=DAILY,
    backfill_policy=RANGE_RUN,
    ins={
        "daily_revenue": dg.AssetIn(partition_mapping=mappings.identity()),
        "monthly_targets": dg.AssetIn(partition_mapping=mappings.fan_out()),
    },
    group_name="planning",
)
def daily_target_attainment(daily_revenue: DataFrame, monthly_targets: DataFrame) -> DataFrame:
    """Each day's revenue against its share of the month's target (monthly -> daily fan-out)."""
    month = F.date_format(F.trunc(F.to_date("ds"), "month"), "yyyy-MM-dd")
    days_in_month = F.dayofmonth(F.last_day(F.to_date("ds")))
    targets = monthly_targets.select(F.col("ds").alias("month"), "target_usd")
    return daily_revenue.join(targets, month == F.col("month")).select(
        "ds",
        F.round(F.col("revenue_usd") / (F.col("target_usd").cast("double") / days_in_month), 4).alias("attainment"),
    )


@dg.asset(partitions_def=DAILY, backfill_policy=RANGE_RUN, group_name="finance")
def fx_rates(context: dg.AssetExecutionContext, spark: SparkResource) -> DataFrame:
    """Units of each currency per USD, per day, as the rate feed delivered them. Finance
    corrects published rates in place, outside Dagster's runs
    (`python -m partition_assets.example.fx_corrections`): a re-run that must reproduce
    what readers saw reads the version its original read (`--inputs-as-of original`)."""
    return _each_key(context.partition_keys, lambda day: sources.fx_rates(spark.spark_session, day), "ds")


@dg.asset(
    partitions_def=DAILY,
    backfill_policy=RANGE_RUN,
    ins={
        "daily_revenue": dg.AssetIn(partition_mapping=mappings.identity()),
        "fx_rates": dg.AssetIn(partition_mapping=mappings.identity()),
    },
    group_name="finance",
)
def daily_revenue_eur(daily_revenue: DataFrame, fx_rates: DataFrame) -> DataFrame:
    """Each day's revenue in EUR at that day's rate."""
    eur = fx_rates.filter(F.col("currency") == "eur").select("ds", "units_per_usd")
    return daily_revenue.join(eur, "ds").select(
        "ds", F.round(F.col("revenue_usd") * F.col("units_per_usd"), 2).alias("revenue_eur")
    )


@dg.asset(
    partitions_def=CAMPAIGNS,
    backfill_policy=RANGE_RUN,
    # Spend reports go to the marketing budget: a second person approves a backfill of them.
    metadata={"partition_column": "campaign", **backfill_approval()},
    group_name="marketing",
)
def campaign_report(context: dg.AssetExecutionContext, spark: SparkResource) -> DataFrame:
    """Clicks and spend per campaign (dynamic partitions: add keys at run time)."""
    return _each_key(
        context.partition_keys,
        lambda campaign: sources.campaign_clicks(spark.spark_session, campaign),
        "campaign",
    )
