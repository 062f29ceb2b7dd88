"""The code location of the planning rules' conformance tests (partition_assets_tests/conformance/
test_planning_rules.py): trivial assets, each shaped as a user writes one of Dagster's rules.

- `workday` (weekdays of January 2024: Saturdays and Sundays excluded) and `previous_workday`,
  which reads the workday before its own (`TimeWindowPartitionMapping(-1, -1)`);
  `batched_workday`, one run per backfill (`BackfillPolicy.single_run()`).
- `june_orders` (from June 2024) read by `may_report` (from May 2024: its May partitions read
  June-only partitions that do not exist) and by `tolerant_report` (the same, allowing them);
  `closed_ledger` (ends 2024-05-15) read by `open_report` (runs past that end).
- `regional`, whose static keys hold a comma, a slash, a space and non-ASCII letters.

Each reads its parents as `deps` (nothing is loaded), so that Dagster's own backfill runs a
partition whose parent lies outside the backfill as it runs any other; the in-process executor
runs them in the test's process.
"""

import warnings
from datetime import datetime

import dagster as dg

WEEKDAYS = dg.DailyPartitionsDefinition("2024-01-01", end_date="2024-02-01", exclusions=["0 0 * * 6,0"])
FROM_MAY = dg.DailyPartitionsDefinition("2024-05-01", end_date="2024-07-01")
FROM_JUNE = dg.DailyPartitionsDefinition("2024-06-01", end_date="2024-07-01")
UNTIL_MID_MAY = dg.DailyPartitionsDefinition("2024-05-01", end_date="2024-05-16")
ODD_KEYS = ["a,b", "c/d", "é ü", "plain"]
# A holiday as a datetime (a Monday, 2024's Martin Luther King Jr. Day), beside the weekly cron exclusion.
HOLIDAY = datetime(2024, 1, 15)
HOLIDAYS = dg.DailyPartitionsDefinition("2024-01-01", end_date="2024-02-01", exclusions=["0 0 * * 6,0", HOLIDAY])


# Beta parameters of Dagster's: their warnings would be every command's first lines of output.
with warnings.catch_warnings():
    warnings.simplefilter("ignore", dg.BetaWarning)
    ALLOWING_MISSING = dg.TimeWindowPartitionMapping(allow_nonexistent_upstream_partitions=True)

    @dg.asset(partitions_def=WEEKDAYS, backfill_policy=dg.BackfillPolicy.single_run())
    def batched_workday() -> None:
        """Stores nothing: Dagster's default IO manager cannot store a run of several partitions."""


@dg.asset(partitions_def=WEEKDAYS)
def workday() -> int:
    return 1


@dg.asset(
    partitions_def=WEEKDAYS,
    deps=[dg.AssetDep(workday, partition_mapping=dg.TimeWindowPartitionMapping(start_offset=-1, end_offset=-1))],
)
def previous_workday() -> int:
    return 1


@dg.asset(partitions_def=HOLIDAYS)
def open_day() -> int:
    return 1


@dg.asset(
    partitions_def=HOLIDAYS,
    deps=[dg.AssetDep(open_day, partition_mapping=dg.TimeWindowPartitionMapping(start_offset=-2, end_offset=1))],
)
def around_open_day() -> int:
    return 1


@dg.asset(partitions_def=FROM_JUNE)
def june_orders() -> int:
    return 1


@dg.asset(partitions_def=FROM_MAY, deps=[june_orders])
def may_report() -> int:
    return 1


@dg.asset(partitions_def=FROM_MAY, deps=[dg.AssetDep(june_orders, partition_mapping=ALLOWING_MISSING)])
def tolerant_report() -> int:
    return 1


@dg.asset(partitions_def=UNTIL_MID_MAY)
def closed_ledger() -> int:
    return 1


@dg.asset(partitions_def=FROM_MAY, deps=[closed_ledger])
def open_report() -> int:
    return 1


@dg.asset(partitions_def=dg.StaticPartitionsDefinition(ODD_KEYS))
def regional() -> int:
    return 1


defs = dg.Definitions(
    assets=[
        workday,
        previous_workday,
        batched_workday,
        open_day,
        around_open_day,
        june_orders,
        may_report,
        tolerant_report,
        closed_ledger,
        open_report,
        regional,
    ],
    executor=dg.in_process_executor,
)
