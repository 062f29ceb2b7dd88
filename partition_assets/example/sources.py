"""Deterministic source data: every row derives from its partition key.

Re-running a partition yields identical rows, which is what makes a backfill of
the example pipeline checkable. Rows are generated on Spark executors
(`spark.range`), never built on the driver.
"""

from __future__ import annotations

from datetime import datetime

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

EVENTS_PER_HOUR = 24
REGION_OF_COUNTRY = {"de": "emea", "fr": "emea", "us": "amer", "br": "amer", "jp": "apac", "in": "apac"}
COUNTRIES = sorted(REGION_OF_COUNTRY)
REGIONS = sorted(set(REGION_OF_COUNTRY.values()))
CAMPAIGN_DAYS = 10
CURRENCIES = ["eur", "jpy"]
_TYPICAL_UNITS_PER_USD = {"eur": 0.9, "jpy": 150.0}


def hourly_events(spark: SparkSession, first_hour: datetime, hours: int) -> DataFrame:
    """EVENTS_PER_HOUR order events for each of `hours` UTC hours from `first_hour`.

    The `ds` column is the hourly partition key ('%Y-%m-%d-%H:%M').
    """
    hour_index = F.floor(F.col("id") / EVENTS_PER_HOUR)
    sequence = F.col("id") % EVENTS_PER_HOUR
    hour_start = F.timestamp_seconds(F.lit(int(first_hour.timestamp())) + hour_index * 3600)
    ds = F.date_format(hour_start, "yyyy-MM-dd-HH:mm")
    return spark.range(hours * EVENTS_PER_HOUR).select(
        F.concat_ws("/", ds, sequence.cast("string")).alias("event_id"),
        _pick(COUNTRIES, F.xxhash64(ds, sequence, F.lit("country"))).alias("country"),
        _money(F.xxhash64(ds, sequence, F.lit("amount")), 10_000).alias("amount"),
        F.timestamp_seconds(F.unix_seconds(hour_start) + sequence * 150).alias("event_ts"),
        ds.alias("ds"),
    )


def country_attributes(spark: SparkSession, countries: list[str]) -> DataFrame:
    """One row of attributes per country; `country` is the partition column."""
    country = _pick_by_index(countries, F.col("id"))
    seed = F.xxhash64(country)
    return spark.range(len(countries)).select(
        _pick_by_index([REGION_OF_COUNTRY[c] for c in countries], F.col("id")).alias("region"),
        (F.pmod(seed, F.lit(200)) + 5).alias("population_m"),
        F.round(F.pmod(seed, F.lit(1000)) / 1000.0 + 0.5, 3).alias("fx_to_usd"),
        country.alias("country"),
    )


def fx_rates(spark: SparkSession, day: str) -> DataFrame:
    """The rate feed's units of each currency per USD on `day`: within 5 % of a typical rate."""
    currency = _pick_by_index(CURRENCIES, F.col("id"))
    typical = _pick_by_index([str(_TYPICAL_UNITS_PER_USD[c]) for c in CURRENCIES], F.col("id")).cast("double")
    wobble = F.pmod(F.xxhash64(F.lit(day), currency), F.lit(1001)) / 10000.0 - 0.05
    return spark.range(len(CURRENCIES)).select(
        currency.alias("currency"), F.round(typical * (1 + wobble), 4).alias("units_per_usd")
    )


def monthly_target(spark: SparkSession, month_key: str) -> DataFrame:
    """The revenue target (USD) of a month partition."""
    return spark.range(1).select(_money(F.xxhash64(F.lit(month_key), F.lit("target")), 1_000_000).alias("target_usd"))


def campaign_clicks(spark: SparkSession, campaign: str) -> DataFrame:
    """Clicks per day of a campaign, for CAMPAIGN_DAYS days."""
    seed = F.xxhash64(F.lit(campaign), F.col("id"))
    return spark.range(CAMPAIGN_DAYS).select(
        F.col("id").cast("int").alias("campaign_day"),
        F.pmod(seed, F.lit(5000)).alias("clicks"),
        F.pmod(F.xxhash64(F.lit(campaign), F.col("id"), F.lit("spend")), F.lit(900)).alias("spend_usd"),
    )


def _pick(values: list[str], seed: Column) -> Column:
    return _pick_by_index(values, F.pmod(seed, F.lit(len(values))))


def _pick_by_index(values: list[str], index: Column) -> Column:
    return F.element_at(F.array(*[F.lit(v) for v in values]), (index + 1).cast("int"))


def _money(seed: Column, max_cents: int) -> Column:
    return (F.pmod(seed, F.lit(max_cents)) / 100.0).cast("decimal(12,2)")
