"""Assets that read the wall clock, one form each, beside look-alikes that do not.

Read by partition_assets_tests/unit/test_lint.py, which names the expected findings by line: keep lines
in place when editing (add new cases at the end). The assets are never materialized.
"""

import datetime
import datetime as dt
import time
from datetime import date
from datetime import datetime as DateTime
from time import time as epoch_seconds

import dagster as dg
import pandas as pd
import pendulum
from pyspark.sql import functions as F
from pyspark.sql.functions import current_date, expr

DAYS = dg.DailyPartitionsDefinition("2024-01-01")
TODAY_SQL = "SELECT * FROM events WHERE ds = CURRENT_DATE"


@dg.asset
def datetime_module_now():
    return datetime.datetime.now()


@dg.asset
def aliased_module_utcnow():
    return dt.datetime.utcnow()


@dg.asset
def imported_class_today():
    return DateTime.today()


@dg.asset
def date_today():
    return date.today()


@dg.asset
def time_time():
    return time.time()


@dg.asset
def imported_time_function():
    return epoch_seconds()


@dg.asset
def pendulum_now_and_today():
    return pendulum.now(), pendulum.today()


@dg.asset
def pandas_timestamp_now():
    return pd.Timestamp.now()


@dg.asset
def spark_functions(spark):
    return spark.range(1).select(F.current_date(), F.current_timestamp(), F.now(), F.localtimestamp())


@dg.asset
def spark_function_imported_by_name(spark):
    return spark.range(1).select(current_date())


@dg.asset
def sql_strings(spark):
    frame = spark.sql("select * from events where ds >= date_sub(current_date(), 7)")
    frame = frame.where(f"ts < now() and region = '{'emea'}'")
    frame = frame.selectExpr("ds", "localtimestamp() as loaded_at")
    return frame.withColumn("day", expr("Current_Timestamp"))


@dg.asset
def sql_through_a_module_constant(spark):
    return spark.sql(TODAY_SQL)


def _stamp(frame):
    return frame.withColumn("loaded_at", F.current_timestamp())


def _prepare(frame):
    return _stamp(frame)


@dg.asset
def through_helpers(spark):
    return _prepare(spark.range(1))


def _reference_clock():
    return pendulum.today()


@dg.asset
def helper_passed_not_called(spark):
    return [_reference_clock][0]()


# Look-alikes: none of these read the clock.


def now():
    return "2024-01-01"


@dg.asset(partitions_def=DAYS)
def partition_time(context: dg.AssetExecutionContext, spark):
    """Mentions current_date and datetime.now() in a docstring only."""
    day = DateTime.fromisoformat(context.partition_key)
    window = context.partition_time_window
    local_now = now()
    return spark.range(1).select(
        F.lit(day.isoformat()).alias("ds"),
        F.lit(str(window.start)).alias("start"),
        F.lit(local_now).alias("now"),
        F.col("current_date"),
    )


@dg.asset(partitions_def=DAYS)
def shadowed_names(context: dg.AssetExecutionContext, spark):
    def current_date():
        return context.partition_key

    clock = context.instance
    time.sleep(0)
    frame = spark.range(1).where("ds = 'now'")
    return frame.select(F.lit(current_date()).alias("ds"), F.lit(str(clock)).alias("now"))


@dg.asset(name="renamed_clean")
def renamed(spark):
    return spark.sql("select 1 as current_dates_seen")


@dg.multi_asset(specs=[dg.AssetSpec("first_of_two"), dg.AssetSpec("second_of_two")])
def two_stamped_tables():
    stamp = datetime.datetime.today()
    yield dg.MaterializeResult(asset_key="first_of_two", metadata={"at": str(stamp)})
    yield dg.MaterializeResult(asset_key="second_of_two", metadata={"at": str(stamp)})


@dg.op
def clock_op():
    return time.time()


@dg.graph_asset
def graph_of_a_clock_op():
    return clock_op()
