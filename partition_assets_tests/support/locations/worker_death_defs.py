"""A code location for the tests of a backfill worker that dies mid-run
(partition_assets_tests/integration/test_local_workers_death.py): `dies_once` kills, on its first run
of DYING_PARTITION, what PARTITION_ASSETS_TEST_KILL names: `worker` (its own process, as an OOM
killer or an operator's kill -9 would) or `fork_server` (the process its worker was forked
from, which every worker dies with). A file under PARTITION_ASSETS_TEST_KILL_MARKERS records
that it did, so that its next run lives. `raw` before it and `after` reading it sleep."""

import os
import signal
import time
from pathlib import Path

import dagster as dg

from partition_assets.partitions import daily, mappings

DAYS = daily("2024-01-01")
DYING_PARTITION = "2024-01-02"
KILL_ENV = "PARTITION_ASSETS_TEST_KILL"
MARKERS_ENV = "PARTITION_ASSETS_TEST_KILL_MARKERS"


@dg.asset(partitions_def=DAYS)
def raw(context: dg.AssetExecutionContext) -> None:
    time.sleep(0.2)


@dg.asset(partitions_def=DAYS, deps=[dg.AssetDep("raw", partition_mapping=mappings.identity())])
def dies_once(context: dg.AssetExecutionContext) -> None:
    marker = Path(os.environ[MARKERS_ENV]) / context.partition_key
    if context.partition_key == DYING_PARTITION and not marker.exists():
        marker.touch()
        os.kill(os.getpid() if os.environ[KILL_ENV] == "worker" else os.getppid(), signal.SIGKILL)
        time.sleep(60)  # the fork server's death reaches this worker through its death signal
    time.sleep(0.2)


@dg.asset(partitions_def=DAYS, deps=[dg.AssetDep("dies_once", partition_mapping=mappings.identity())])
def after(context: dg.AssetExecutionContext) -> None:
    time.sleep(0.1)


defs = dg.Definitions(assets=[raw, dies_once, after])
