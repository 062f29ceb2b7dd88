"""Spark's FAIR scheduler on the shared Spark Connect server: backfill jobs in a low-weight
pool, production jobs in a pool that wins the cores (issue 24: backfills never starve
production).

The mechanism Spark Connect supports (Spark 4): `spark.scheduler.pool` set as a session
conf (`spark.conf.set`, or `SET spark.scheduler.pool=...` in SQL) becomes the local
property of every job the session's requests start, which is what the FAIR scheduler
reads to pick a job's pool (partition_assets_tests/integration/test_spark_pools.py reads it back from a
task). So:
- the server starts with `spark.scheduler.mode=FAIR` and an allocation file
  (`ALLOCATION_XML`, written next to its other state files) defining both pools;
- a session of a node run of a backfill (a run tagged `dagster/backfill`, or any run in a
  backfill's local worker, which sets `POOL_ENV`) joins `BACKFILL_POOL`; every other
  session joins `PRODUCTION_POOL` (spark/resource.py sets it when the session is made).
On a standalone cluster the pools apply the same way: the FAIR scheduler runs in the
driver (the Connect server), and decides which pool's tasks the cluster's executors run.

Not guaranteed: pools share cores task by task, without preempting a running task: a long
task of a backfill keeps its core until it ends. A session made with `in_process=True`
(a classic driver in the run's process) has a scheduler of its own and no other job to
share with; a conf or spark-defaults.conf that sets `spark.scheduler.mode` or the
allocation file wins over these.
"""

from pathlib import Path

PRODUCTION_POOL, BACKFILL_POOL = "production", "backfill"
# Set in a backfill's local worker processes: every session they make joins the backfill pool.
POOL_ENV = "PARTITION_ASSETS_SPARK_POOL"
POOL_CONF = "spark.scheduler.pool"

# Production's jobs get 4 shares of the cores for the backfill's 1, and at least 1 core
# whenever they have tasks waiting; within a pool, jobs share fairly.
ALLOCATION_XML = """<?xml version="1.0"?>
<allocations>
  <pool name="production">
    <schedulingMode>FAIR</schedulingMode>
    <weight>4</weight>
    <minShare>1</minShare>
  </pool>
  <pool name="backfill">
    <schedulingMode>FAIR</schedulingMode>
    <weight>1</weight>
    <minShare>0</minShare>
  </pool>
</allocations>
"""


def fair_scheduler_conf(allocation_file: Path) -> dict[str, str]:
    """The server conf that turns on the FAIR scheduler with both pools, after writing
    their allocation file at `allocation_file`."""
    allocation_file.write_text(ALLOCATION_XML)
    return {"spark.scheduler.mode": "FAIR", "spark.scheduler.allocation.file": str(allocation_file)}
