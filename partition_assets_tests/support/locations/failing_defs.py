"""A code location whose asset fails as a user's code fails: with the user's own exception,
for every partition (two causes), to read what a failed backfill prints."""

import dagster as dg

from partition_assets.partitions import daily

DAYS = daily("2024-01-01")
# The partition that fails with the second cause.
OTHER_CAUSE_PARTITION = "2024-01-03"


class SourceSchemaError(Exception):
    """The user's own error: what the backfill's last line must name."""


@dg.asset(partitions_def=DAYS)
def drifting(context: dg.AssetExecutionContext) -> None:
    if context.partition_key == OTHER_CAUSE_PARTITION:
        raise ValueError(f"no rows for {OTHER_CAUSE_PARTITION}")
    raise SourceSchemaError("column amount became a string: cast it in the source query")


defs = dg.Definitions(assets=[drifting])
