"""Spark's FAIR scheduler on the shared Spark Connect server: backfill jobs in a low-weight
pool, production jobs in a pool that takes every core it has tasks for (issues 24 and 44:
backfills never starve production, also when Spark is the bottleneck).

The mechanism Spark Connect supports (Spark 4): `spark.scheduler.pool` set as a session
conf (`spark.conf.set`, or `SET spark.scheduler.pool=...` in SQL) becomes the local
property of every job the session's requests start, which is what the FAIR scheduler
reads to pick a job's pool (partition_assets_tests/integration/test_scheduler_pools.py reads it back from a
task). So:
- the server starts with `spark.scheduler.mode=FAIR` and an allocation file
  (`allocation_xml`, written next to its other state files) defining both pools, production's
  minShare being the server's cores (`cores_of` its master): whenever production has tasks
  waiting, every core that frees goes to it before any backfill task;
- a session of a backfill's run (a node run its lease proof shows an engine backfill's, a run
  of one of Dagster's own backfills, or any run in a backfill's local worker, which sets
  `POOL_ENV`) joins `BACKFILL_POOL`; every other session joins `PRODUCTION_POOL`, a run that
  only carries an engine backfill's id tag included (spark/resource.py `scheduler_pool_of`,
  set when the session is made);
- the scheduler never preempts a running task by itself, and a backfill task may take as
  long as its whole job (a partition's scan in one task per core): so the server runs
  `PREEMPTING_LISTENER` (spark/jvm/ProductionFirstListener.java; `preemption_conf`). When a
  production stage is submitted, it kills the backfill tasks running then, and those that
  take a core before production's tasks are registered; Spark runs them again (a killed task
  is no failure), once production's tasks have their cores. Production waits for no backfill
  task killed fewer than `MAX_KILLS_PER_TASK_CONF` times (default 3); the backfill does again
  the killed tasks' work, each task's at most that many times, then runs it to its end.
  Measured in bench/results/isolation.md against the pools alone, slicing and FIFO;
- a deployment may also cut a backfill session's scans into short tasks
  (`backfill_slicing_conf`: at least `tasks_per_core` x cores of them), which bounds
  production's wait without preemption, at the cost of that many files per partition.
On a standalone cluster the pools apply the same way: the FAIR scheduler runs in the
driver (the Connect server), and decides which pool's tasks the cluster's executors run;
the listener, in the driver too, kills tasks on any executor.

Not guaranteed: a killed task that does not check for its interruption (a long call into
native code) keeps its core until it ends; a Python UDF's worker is killed after
`spark.python.task.killTimeout` (2 s). Production's jobs on a server the product did not
start (`remote=`) preempt nothing unless that server loads the jar and the listener. The
cores of a master other than local[N] are unknown here: production's minShare is then 1 and
backfills are not sliced unless the server's conf names `spark.default.parallelism`. A
session made with `in_process=True` (a classic driver in the run's process) has a scheduler
of its own and no other job to share with; a conf or spark-defaults.conf that sets
`spark.scheduler.mode` or the allocation file wins over these.
"""

import os
import re
from collections.abc import Mapping
from pathlib import Path

from partition_assets.errors import SparkConfigError

PRODUCTION_POOL, BACKFILL_POOL = "production", "backfill"
# Set in a backfill's local worker processes: every session they make joins the backfill pool.
POOL_ENV = "PARTITION_ASSETS_SPARK_POOL"
POOL_CONF = "spark.scheduler.pool"
# The listener that kills a backfill's running tasks for a production stage; it names both
# pools as above (partition_assets_tests/integration/test_scheduler_pools.py holds them equal).
PREEMPTING_LISTENER = "partition_assets.spark.ProductionFirstListener"
LISTENERS_KEY = "spark.extraListeners"
# The server conf the listener reads: how often one backfill task may be killed; from its
# attempt after that it runs to its end. Unbounded, a 62 s backfill job beside a small
# production query every 20 s did not finish in 495 s, a task at its 54th attempt (issue 50).
MAX_KILLS_PER_TASK_CONF = "spark.partition_assets.preemption.maxKillsPerTask"
DEFAULT_MAX_KILLS_PER_TASK = 3
# The session conf a scan's (spark.range, files, local data) task count defaults to; file
# scans split at least as many ways (spark.sql.files.minPartitionNum defaults to it).
LEAF_PARALLELISM_CONF = "spark.sql.leafNodeDefaultParallelism"
# Slicing is off unless a deployment turns it on: preemption bounds production's wait without
# it, and sliced scans write up to that many files per partition (16 on local[2], against 2).
# On an idle machine, a 31-day backfill of a Spark-heavy asset took 44.1 s sliced against 36.9 s
# with preemption, alone (bench/results/isolation.md).
DEFAULT_TASKS_PER_CORE = 0
SLICED_TASKS_PER_CORE = 8  # the setting that bounds production's wait to one short task
# Beyond both pools' minShare, cores go by running tasks / weight: production's jobs keep
# the cores they have tasks for, backfills take what is left.
PRODUCTION_WEIGHT = 100


def allocation_xml(cores: int) -> str:
    """The FAIR pools of a server of `cores` cores: production's minShare is all of them."""
    return f"""<?xml version="1.0"?>
<allocations>
  <pool name="{PRODUCTION_POOL}">
    <schedulingMode>FAIR</schedulingMode>
    <weight>{PRODUCTION_WEIGHT}</weight>
    <minShare>{cores}</minShare>
  </pool>
  <pool name="{BACKFILL_POOL}">
    <schedulingMode>FAIR</schedulingMode>
    <weight>1</weight>
    <minShare>0</minShare>
  </pool>
</allocations>
"""


def cores_of(master: str) -> int | None:
    """The cores a `master` of local mode runs tasks on (local, local[N], local[*], local[N,F]);
    None for a cluster's master, whose cores are not known here."""
    found = re.fullmatch(r"local(?:\[(\*|\d+)(?:,\d+)?\])?", master.strip())
    if found is None:
        return None
    count = found.group(1)
    if count is None:
        return 1
    return (os.cpu_count() or 1) if count == "*" else int(count)


def fair_scheduler_conf(allocation_file: Path, master: str) -> dict[str, str]:
    """The server conf that turns on the FAIR scheduler with both pools, after writing
    their allocation file, sized for `master`'s cores, at `allocation_file`."""
    allocation_file.write_text(allocation_xml(cores_of(master) or 1))
    return {"spark.scheduler.mode": "FAIR", "spark.scheduler.allocation.file": str(allocation_file)}


def preemption_conf(conf: Mapping[str, str]) -> dict[str, str]:
    """The listeners of a server whose conf is `conf`, the preempting one then the conf's own,
    and the bound on one backfill task's kills: the conf's own, else DEFAULT_MAX_KILLS_PER_TASK.

    Raises:
        SparkConfigError: the conf's bound is not a whole number >= 0; no server was started.
    """
    kills = str(conf.get(MAX_KILLS_PER_TASK_CONF, DEFAULT_MAX_KILLS_PER_TASK)).strip()
    if not kills.isdigit():
        raise SparkConfigError(
            f"{MAX_KILLS_PER_TASK_CONF}={kills!r} is not a whole number >= 0: give how often one backfill task "
            f"may be killed for production's jobs (default {DEFAULT_MAX_KILLS_PER_TASK}; 0: never); no Spark "
            "server was started"
        )
    return {
        LISTENERS_KEY: ",".join([PREEMPTING_LISTENER, *filter(None, [conf.get(LISTENERS_KEY)])]),
        MAX_KILLS_PER_TASK_CONF: kills,
    }


def backfill_slicing_conf(cores: int | None, tasks_per_core: int) -> dict[str, str]:
    """The session conf of a backfill session on a server of `cores` cores: scans in at
    least `tasks_per_core` x `cores` tasks; none (no slicing) when either is unknown or 0."""
    if not cores or not tasks_per_core:
        return {}
    return {LEAF_PARALLELISM_CONF: str(tasks_per_core * cores)}
