"""The example code location plus two assets for the webserver engine tests: `held`, whose
runs wait until the test releases them (so a backfill is deterministically running when
the test cancels it), and `quick`, which does nothing."""

import os
import time
from pathlib import Path

import dagster as dg

from partition_assets.example import definitions as example
from partition_assets.partitions import daily

DAYS = daily("2024-01-01")
# A folder the test names; a file `<partition>` (or `all`) in it releases held's runs of that partition.
RELEASE_DIR_ENV = "PARTITION_ASSETS_TEST_RELEASE_DIR"
HOLD_LIMIT_SECONDS = 300


@dg.asset(partitions_def=DAYS)
def held(context: dg.AssetExecutionContext) -> None:
    """Returns once its partition is released (at most HOLD_LIMIT_SECONDS, then fails)."""
    folder = Path(os.environ[RELEASE_DIR_ENV])
    deadline = time.monotonic() + HOLD_LIMIT_SECONDS
    while not (folder / context.partition_key).exists() and not (folder / "all").exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"held[{context.partition_key}] was not released within {HOLD_LIMIT_SECONDS} s")
        time.sleep(0.1)


@dg.asset(partitions_def=DAYS)
def quick() -> None:
    """Nothing to do: a backfill of it costs only the engine's bookkeeping."""


defs = dg.Definitions.merge(example.defs, dg.Definitions(assets=[held, quick]))
