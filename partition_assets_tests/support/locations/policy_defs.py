"""A code location as a Dagster user writes it, for the conformance tests of backfill policies and
run config (partition_assets_tests/conformance): trivial assets on Dagster's default IO manager,
nothing of partition_assets in them. An asset that runs one partition per run stores its value
through the IO manager; one that runs ranges stores nothing (Dagster's default IO manager takes
no output of several partitions) and says what it computed in its materializations' metadata
(`value`, naming the run's range), so that the engine's outputs and Dagster's can be compared.

Its assets reproduce the shapes of Dagster's own tests of backfill policies
(test_asset_backfill_with_backfill_policies.py): an asset with `single_run()`, one with
`multi_run(n)`, a parent and a child with different policies, a parent and a child with the
same policy, a daily single-run parent of a weekly single-run child, a self-dependent asset
with `multi_run(2)`, an asset with no policy, a multi-run child of a parent that fails one day;
and an asset with a `Config` (`scaled`).
"""

from pathlib import Path

import dagster as dg

DAYS = dg.DailyPartitionsDefinition("2024-01-01")
WEEKS = dg.WeeklyPartitionsDefinition("2024-01-07")


def _ranged(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    """What a run of a range computed: each of its partitions' materialization names the range."""
    keys = context.partition_keys
    return dg.MaterializeResult(metadata={"value": f"{context.asset_key.to_user_string()}:{keys[0]}..{keys[-1]}"})


@dg.asset(partitions_def=DAYS, backfill_policy=dg.BackfillPolicy.single_run())
def single(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    return _ranged(context)


@dg.asset(partitions_def=DAYS, backfill_policy=dg.BackfillPolicy.multi_run(3))
def chunked(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    return _ranged(context)


# Dagster's test_asset_backfill_parent_and_children_have_different_backfill_policy: the child waits
# for its whole parent, then runs in its own runs.
@dg.asset(partitions_def=DAYS, backfill_policy=dg.BackfillPolicy.multi_run(1), deps=[single])
def after_single(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    return _ranged(context)


# Dagster's test_asset_backfill_parent_and_children_have_same_backfill_policy: Dagster runs the
# parent and this child in one run; the engine in the same range, one run each.
@dg.asset(partitions_def=DAYS, backfill_policy=dg.BackfillPolicy.single_run(), deps=[single])
def single_child(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    return _ranged(context)


# Dagster's test_asset_backfill_status_count_with_backfill_policies: daily single-run into weekly.
@dg.asset(partitions_def=WEEKS, backfill_policy=dg.BackfillPolicy.single_run(), deps=[single])
def weekly(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    return _ranged(context)


# A self-dependent asset with a policy: Dagster requests its first n partitions, then the next n.
@dg.asset(
    partitions_def=DAYS,
    backfill_policy=dg.BackfillPolicy.multi_run(2),
    deps=[
        dg.AssetDep(
            "running_total",
            partition_mapping=dg.TimeWindowPartitionMapping(
                start_offset=-1, end_offset=-1, allow_nonexistent_upstream_partitions=True
            ),
        )
    ],
)
def running_total(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    return _ranged(context)


# No policy: Dagster's default, one run per partition.
@dg.asset(partitions_def=DAYS)
def plain(context: dg.AssetExecutionContext) -> str:
    return f"plain:{context.partition_key}"


# Dagster's asset backfill tests with failures: a day of a plain parent fails, so its multi_run(3)
# child's runs close up around the day blocked.
FAILING_DAY = "2024-01-05"


@dg.asset(partitions_def=DAYS)
def flaky(context: dg.AssetExecutionContext) -> str:
    if context.partition_key == FAILING_DAY:
        raise RuntimeError(f"flaky fails on {FAILING_DAY}")
    return f"flaky:{context.partition_key}"


@dg.asset(partitions_def=DAYS, backfill_policy=dg.BackfillPolicy.multi_run(3), deps=[flaky])
def after_flaky(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    return _ranged(context)


class ScaleConfig(dg.Config):
    factor: int = 1
    # A file that must exist for a run to succeed (empty: none): a test's first attempt fails, its retry not.
    requires_file: str = ""


# Dagster's backfill with run config `factor: 10` stores 10, 20, 30 for the 1st to the 3rd.
@dg.asset(partitions_def=DAYS)
def scaled(context: dg.AssetExecutionContext, config: ScaleConfig) -> int:
    if config.requires_file and not Path(config.requires_file).exists():
        raise FileNotFoundError(f"{config.requires_file} is not there yet")
    return config.factor * int(context.partition_key[-2:])


defs = dg.Definitions(
    assets=[single, chunked, after_single, single_child, weekly, running_total, plain, flaky, after_flaky, scaled]
)
