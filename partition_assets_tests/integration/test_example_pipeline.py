"""Every example asset materialized through Dagster into real Delta tables.

Expected rows are computed independently: source assets from the deterministic
generators, derived assets with pandas over the upstream tables as delta-rs
reads them (not through this library's Spark read path).
"""

from datetime import UTC, datetime

import dagster as dg
import pandas as pd
import pytest
from deltalake import DeltaTable

from partition_assets.example import sources
from partition_assets.run_tags import range_tags
from partition_assets.spark import SparkResource
from partition_assets.storage import DeltaFormat, SparkDeltaIOManager
from partition_assets_tests.support.example_tables import EXAMPLE_ASSETS, as_float, expected_daily_orders, rows
from partition_assets_tests.support.instances import temporary_instance
from partition_assets_tests.support.readers import (
    canonical,
    delta_with_delta_rs,
    delta_with_duckdb,
)

JANUARY = ("2024-01-01", "2024-01-31")


@pytest.fixture(scope="module")
def pipeline(spark_resource: SparkResource, tmp_path_factory):
    """The example pipeline materialized over January 2024, run by run as a user would."""
    lake = tmp_path_factory.mktemp("pipeline") / "lake"
    with temporary_instance(tmp_path_factory.mktemp("pipeline_instance")) as instance:
        io_manager = SparkDeltaIOManager(root_uri=str(lake), spark=spark_resource)

        def run(selection, key=None, first=None, last=None):
            tags = range_tags(first, last) if first else {}
            result = dg.materialize(
                EXAMPLE_ASSETS,
                selection=selection,
                partition_key=key,
                tags=tags,
                instance=instance,
                resources={"spark": spark_resource, "io_manager": io_manager},
            )
            assert result.success

        run(["events"], first="2024-01-01-00:00", last="2024-01-31-23:00")
        run(["events_6h"], first="2024-01-01-00:00", last="2024-01-01-18:00")
        run(["countries"], first="br", last="us")
        run(["regions"], first="amer", last="emea")
        run(["daily_orders"], *(None, *JANUARY))
        run(["daily_region_revenue"], first="2024-01-01|amer", last="2024-01-07|emea")
        run(["region_revenue_7d"], key="2024-01-07|emea")
        run(["daily_revenue"], *(None, *JANUARY))
        run(["revenue_7d"], *(None, *JANUARY))
        # Two runs, so that the self-dependency crosses a run boundary.
        run(["revenue_running_total"], first="2024-01-01", last="2024-01-15")
        run(["revenue_running_total"], first="2024-01-16", last="2024-01-31")
        run(["weekly_revenue"], first="2024-01-01", last="2024-01-22")
        run(["monthly_revenue"], key="2024-01-01")
        run(["monthly_targets"], key="2024-01-01")
        run(["daily_target_attainment"], *(None, *JANUARY))
        run(["fx_rates"], None, *JANUARY)
        run(["daily_revenue_eur"], None, *JANUARY)
        instance.add_dynamic_partitions("campaigns", ["spring_sale"])
        run(["campaign_report"], key="spring_sale")
        yield lake, instance


def table(lake, name) -> pd.DataFrame:
    return DeltaTable(str(lake / name)).to_pandas()


EXPECTED_PARTITIONS = {
    "events": 31 * 24,
    "events_6h": 4,
    "countries": 6,
    "regions": 3,
    "daily_orders": 31,
    "daily_region_revenue": 7 * 3,
    "region_revenue_7d": 1,
    "daily_revenue": 31,
    "revenue_7d": 31,
    "revenue_running_total": 31,
    "weekly_revenue": 4,
    "monthly_revenue": 1,
    "monthly_targets": 1,
    "daily_target_attainment": 31,
    "fx_rates": 31,
    "daily_revenue_eur": 31,
    "campaign_report": 1,
}


def test_every_asset_is_covered():
    assert set(EXPECTED_PARTITIONS) == {a.key.to_user_string() for a in EXAMPLE_ASSETS}


@pytest.mark.parametrize("asset", sorted(EXPECTED_PARTITIONS))
def test_materializations_are_recorded_in_the_instance(pipeline, asset):
    lake, instance = pipeline
    materialized = instance.get_materialized_partitions(dg.AssetKey(asset))
    assert len(materialized) == EXPECTED_PARTITIONS[asset]
    event = instance.get_latest_materialization_event(dg.AssetKey(asset))
    metadata = event.asset_materialization.metadata
    assert metadata["table_uri"].value == str(lake / asset)
    assert metadata["delta_version"].value == DeltaTable(str(lake / asset)).version()


def test_events_equal_the_generator(pipeline, spark):
    lake, _ = pipeline
    stored = table(lake, "events")
    for hour in ("2024-01-01-00:00", "2024-01-15-13:00", "2024-01-31-23:00"):
        start = datetime.strptime(hour, "%Y-%m-%d-%H:%M").replace(tzinfo=UTC)
        generated = sources.hourly_events(spark, start, 1).toPandas()
        assert len(generated) == sources.EVENTS_PER_HOUR
        assert rows(stored[stored.ds == hour], "event_id") == rows(generated, "event_id")


def test_source_dimensions_equal_the_generators(pipeline, spark):
    lake, _ = pipeline
    generated = sources.country_attributes(spark, sources.COUNTRIES).toPandas()
    assert rows(table(lake, "countries"), "country") == rows(generated, "country")
    target = sources.monthly_target(spark, "2024-01-01").toPandas().assign(ds="2024-01-01")
    assert rows(table(lake, "monthly_targets"), "ds") == rows(target, "ds")
    clicks = sources.campaign_clicks(spark, "spring_sale").toPandas().assign(campaign="spring_sale")
    assert rows(table(lake, "campaign_report"), "campaign_day") == rows(clicks, "campaign_day")


def test_cron_fan_in_counts_six_hours_of_events(pipeline):
    lake, _ = pipeline
    events = table(lake, "events")
    windows = table(lake, "events_6h").set_index("ds")
    for start_hour in (0, 6, 12, 18):
        hours = [f"2024-01-01-{h:02d}:00" for h in range(start_hour, start_hour + 6)]
        chosen = events[events.ds.isin(hours)]
        window = windows.loc[f"2024-01-01-{start_hour:02d}:00"]
        assert window.events == len(chosen) == 6 * sources.EVENTS_PER_HOUR
        assert float(window.revenue) == pytest.approx(float(chosen.amount.astype(float).sum()))


def test_regions_roll_up_their_countries(pipeline):
    lake, _ = pipeline
    countries = table(lake, "countries")
    regions = table(lake, "regions").set_index("region")
    for region, members in countries.groupby("region"):
        assert regions.loc[region, "countries"] == len(members)
        assert regions.loc[region, "population_m"] == members.population_m.sum()
        assert regions.loc[region, "fx_to_usd"] == pytest.approx(round(members.fx_to_usd.mean(), 3))


def test_daily_orders_fan_in_from_hourly_events(pipeline):
    lake, _ = pipeline
    expected = expected_daily_orders(table(lake, "events"))
    stored = table(lake, "daily_orders").set_index(["ds", "region"]).sort_index()
    assert len(stored) == 31 * 3
    assert list(stored.orders) == list(expected.orders)
    assert list(as_float(stored.revenue)) == pytest.approx(list(expected.revenue))


def usd_by_day_and_region(lake) -> pd.DataFrame:
    orders = table(lake, "daily_orders")
    fx = table(lake, "regions").set_index("region").fx_to_usd
    orders["revenue_usd"] = (as_float(orders.revenue) * orders.region.map(fx)).round(2)
    return orders


def test_multi_partitioned_revenue_per_day_and_region(pipeline):
    lake, _ = pipeline
    expected = usd_by_day_and_region(lake)
    expected = expected[expected.ds <= "2024-01-07"]
    stored = table(lake, "daily_region_revenue")
    assert set(zip(stored.ds, stored.region)) == {
        (f"2024-01-0{d}", region) for d in range(1, 8) for region in sources.REGIONS
    }
    assert rows(stored[["ds", "region", "orders", "revenue_usd"]], ["ds", "region"]) == rows(
        expected[["ds", "region", "orders", "revenue_usd"]], ["ds", "region"]
    )


def test_per_dimension_rolling_window(pipeline):
    lake, _ = pipeline
    stored = table(lake, "region_revenue_7d").iloc[0]
    region_days = table(lake, "daily_region_revenue").query("region == 'emea'")
    assert (stored.ds, stored.region, stored.days_in_window) == ("2024-01-07", "emea", 7)
    assert stored.revenue_usd_7d == pytest.approx(region_days.revenue_usd.sum())


def expected_daily_revenue(lake) -> pd.Series:
    return usd_by_day_and_region(lake).groupby("ds").revenue_usd.sum().round(2)


def test_daily_revenue(pipeline):
    lake, _ = pipeline
    stored = table(lake, "daily_revenue").set_index("ds").sort_index()
    assert list(stored.revenue_usd) == pytest.approx(list(expected_daily_revenue(lake)))


def test_rolling_7_day_revenue(pipeline):
    lake, _ = pipeline
    daily = expected_daily_revenue(lake)
    stored = table(lake, "revenue_7d").set_index("ds").sort_index()
    expected = daily.rolling(7, min_periods=1).sum()
    assert list(stored.revenue_usd_7d) == pytest.approx(list(expected), abs=0.011)
    assert list(stored.days_in_window) == [min(day, 7) for day in range(1, 32)]


def test_running_total_carries_across_run_boundaries(pipeline):
    lake, _ = pipeline
    daily = table(lake, "daily_revenue").set_index("ds").sort_index().revenue_usd
    stored = table(lake, "revenue_running_total").set_index("ds").sort_index()
    assert list(stored.running_total_usd) == pytest.approx(list(daily.cumsum()), abs=0.05)


def test_weekly_and_monthly_fan_in(pipeline):
    lake, _ = pipeline
    daily = table(lake, "daily_revenue").set_index("ds").sort_index().revenue_usd
    weekly = table(lake, "weekly_revenue").set_index("ds").sort_index()
    assert list(weekly.index) == ["2024-01-01", "2024-01-08", "2024-01-15", "2024-01-22"]
    assert list(weekly.days) == [7, 7, 7, 7]
    assert weekly.loc["2024-01-08", "revenue_usd"] == pytest.approx(daily["2024-01-08":"2024-01-14"].sum())
    monthly = table(lake, "monthly_revenue").iloc[0]
    assert (monthly.ds, monthly.days) == ("2024-01-01", 31)
    assert monthly.revenue_usd == pytest.approx(daily.sum())


def test_target_attainment_fans_out_the_monthly_target(pipeline):
    lake, _ = pipeline
    daily = table(lake, "daily_revenue").set_index("ds").sort_index().revenue_usd
    target = float(table(lake, "monthly_targets").target_usd.iloc[0])
    stored = table(lake, "daily_target_attainment").set_index("ds").sort_index()
    assert list(stored.attainment) == pytest.approx(list((daily / (target / 31)).round(4)))


def test_revenue_in_eur_uses_each_days_generated_rate(pipeline, spark):
    lake, instance = pipeline
    rates = table(lake, "fx_rates")
    for day in ("2024-01-01", "2024-01-31"):
        generated = sources.fx_rates(spark, day).toPandas().assign(ds=day)
        assert rows(rates[rates.ds == day], "currency") == rows(generated, "currency")
    eur = rates[rates.currency == "eur"].set_index("ds").units_per_usd
    usd = table(lake, "daily_revenue").set_index("ds").revenue_usd
    stored = table(lake, "daily_revenue_eur").set_index("ds").sort_index().revenue_eur
    assert list(stored) == pytest.approx(list((usd * eur).round(2).sort_index()))
    # The materialization records the table version of each input it read, and its own.
    metadata = instance.get_latest_materialization_event(
        dg.AssetKey("daily_revenue_eur")
    ).asset_materialization.metadata
    assert metadata["input_versions"].value == {
        "daily_revenue": DeltaTable(str(lake / "daily_revenue")).version(),
        "fx_rates": DeltaTable(str(lake / "fx_rates")).version(),
    }
    assert metadata["delta_version"].value == DeltaTable(str(lake / "daily_revenue_eur")).version()


@pytest.mark.parametrize("asset", sorted(EXPECTED_PARTITIONS))
def test_every_table_reads_the_same_through_duckdb_delta_rs_and_spark(pipeline, spark, asset):
    lake, _ = pipeline
    table = lake / asset
    with_delta_rs = canonical(delta_with_delta_rs(table))
    assert canonical(delta_with_duckdb(table)) == with_delta_rs
    assert canonical(DeltaFormat().read(spark, str(table), None).toPandas()) == with_delta_rs
