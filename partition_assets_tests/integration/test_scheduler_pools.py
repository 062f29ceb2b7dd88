"""Spark isolation (issues 24 and 44): the shared Spark Connect server runs the FAIR
scheduler, each run's Spark jobs land in the pool of its kind (spark/scheduler_pools.py),
as a task of the job reads it back (a run carrying a node run's tags without its proof is
production's), a production job's tasks start while a backfill job's
tasks are still queued, and a production job takes the cores of a backfill job's running
tasks, which run again, on the test session's shared server."""

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType

from partition_assets.run_tags import DAGSTER_BACKFILL_TAG, node_run_tags
from partition_assets.spark import LocalConnectServer, SparkResource
from partition_assets.spark.resource import TASKS_PER_CORE_ENV, spark_conf_from_env
from partition_assets.spark.scheduler_pools import (
    BACKFILL_POOL,
    LEAF_PARALLELISM_CONF,
    MAX_KILLS_PER_TASK_CONF,
    POOL_CONF,
    PRODUCTION_POOL,
    SLICED_TASKS_PER_CORE,
    backfill_slicing_conf,
)
from partition_assets_tests.support.node_runs import materialize_as
from partition_assets_tests.support.polling import wait_for
from partition_assets_tests.support.webserver import free_port

SERVER_CORES = 2  # the shared server is local[2] (conftest.py)
# How long a backfill task's attempt past its bound on kills runs: production's next job comes meanwhile.
SECONDS_PAST_THE_BOUND = 4


@dg.asset
def pool_probe(context: dg.AssetExecutionContext, spark: SparkResource) -> None:
    """Runs one Spark job and records the scheduler pool its task ran in."""

    def pool_of_task(_: int) -> str:  # nested: pickled by value, as the server cannot import tests
        from pyspark import TaskContext  # on the server's Python worker

        return str(TaskContext.get().getLocalProperty("spark.scheduler.pool"))

    session = spark.spark_session
    found = session.range(1).select(F.udf(pool_of_task, StringType())("id")).first()[0]
    slices = session.conf.get(LEAF_PARALLELISM_CONF, None)
    context.add_output_metadata({"pool": found, "mode": session.conf.get("spark.scheduler.mode"), "slices": slices})


def test_a_backfill_runs_spark_jobs_in_the_backfill_pool_and_production_in_its_own(
    spark_resource, instance, monkeypatch
):
    monkeypatch.setenv(TASKS_PER_CORE_ENV, str(SLICED_TASKS_PER_CORE))  # slicing turned on
    spark_resource = SparkResource.from_env()  # the process's one Connect session, sliced for backfills
    pools = {}
    node_tags = node_run_tags("bf-pools", staged=False)
    runs: dict[str, tuple[dict[str, str], str | None]] = {
        "node run": (node_tags, "bf-pools"),  # with its coordinator's proof
        "node run's tags only": (node_tags, None),  # re-executed from the UI, typed in the Launchpad
        "Dagster's backfill": ({DAGSTER_BACKFILL_TAG: "bf-dagster"}, None),
        # Production last: the runs share this process's session, which later tests use as production's.
        "production": ({}, None),
    }
    for kind, (tags, node_run_of) in runs.items():
        result = materialize_as([pool_probe], instance, None, tags, node_run_of, resources={"spark": spark_resource})
        metadata = result.asset_materializations_for_node("pool_probe")[0].metadata
        pools[kind] = (metadata["pool"].value, metadata["mode"].value, metadata["slices"].value)
    sliced = str(SLICED_TASKS_PER_CORE * SERVER_CORES)
    assert pools == {
        "node run": (BACKFILL_POOL, "FAIR", sliced),
        "node run's tags only": (PRODUCTION_POOL, "FAIR", None),  # it writes as production (issue 50)
        "Dagster's backfill": (BACKFILL_POOL, "FAIR", sliced),
        "production": (PRODUCTION_POOL, "FAIR", None),
    }


def task_starts(session: SparkSession, rows: int, seconds_a_row: float, started: Path) -> list[float]:
    """Runs a job of `rows` rows, each taking `seconds_a_row` on the server; the time each of
    its tasks started (one file in folder `started` per task, as it starts)."""

    def start_then_sleep(partition: int) -> str:  # nested: pickled by value
        import time

        path = started / f"{partition}"
        if not path.exists():  # a task's first row
            path.write_text(str(time.time()))
        time.sleep(seconds_a_row)
        return path.read_text()

    task_start = F.udf(start_then_sleep, StringType())(F.spark_partition_id())
    return sorted({float(row[0]) for row in session.range(rows).select(task_start).collect()})


@contextmanager
def pooled_sessions(url: str, tmp_path: Path) -> Iterator[tuple[SparkSession, SparkSession, Path, Path]]:
    """Two sessions on the server at `url`, in the backfill and the production pool, and a folder
    for each one's task starts; both sessions stopped after."""
    backfill, production = SparkSession.builder.remote(url).create(), SparkSession.builder.remote(url).create()
    backfill_started, production_started = tmp_path / "backfill", tmp_path / "production"
    backfill_started.mkdir()
    production_started.mkdir()
    try:
        backfill.conf.set(POOL_CONF, BACKFILL_POOL)
        production.conf.set(POOL_CONF, PRODUCTION_POOL)
        yield backfill, production, backfill_started, production_started
    finally:
        backfill.stop()
        production.stop()


def test_a_production_jobs_tasks_start_while_a_backfill_jobs_tasks_are_queued(spark_resource, tmp_path):
    with pooled_sessions(spark_resource.connect_url(), tmp_path) as (
        backfill,
        production,
        backfill_started,
        production_started,
    ):
        for key, value in backfill_slicing_conf(SERVER_CORES, SLICED_TASKS_PER_CORE).items():
            backfill.conf.set(key, value)
        backfill_starts: list[float] = []
        # 16 rows: one a task when sliced (0.3 s each), 8 a task of 2.4 s when not.
        job = threading.Thread(target=lambda: backfill_starts.extend(task_starts(backfill, 16, 0.3, backfill_started)))
        job.start()

        def backfill_is_running() -> bool:
            """the backfill job's first tasks started"""
            return any(backfill_started.iterdir())

        wait_for(backfill_is_running, timeout=60)
        submitted = time.time()
        production_starts = task_starts(production, 2, 0.1, production_started)
        job.join(timeout=120)
    assert len(backfill_starts) == SLICED_TASKS_PER_CORE * SERVER_CORES, "the backfill's scan was not sliced"
    queued = [start for start in backfill_starts if start > submitted]
    # Backfill tasks were still queued when production's job came, and production's tasks all
    # started before them: it waited for no more than the backfill tasks running then.
    assert queued and max(production_starts) < max(queued), (production_starts, backfill_starts, submitted)


def attempts_then_result(
    session: SparkSession, seconds_first_attempt: float, started: Path, seconds_later_attempts: float = 0
) -> list[str]:
    """Runs a job of one task per server core; each task's attempt writes a file in `started`
    as it starts, and a first attempt takes `seconds_first_attempt`, a later one
    `seconds_later_attempts`. The rows it returns: `<partition>:<attempt>` of the attempts that ended."""

    def attempt(partition: int) -> str:  # nested: pickled by value
        import time

        from pyspark import TaskContext

        number = TaskContext.get().attemptNumber()
        (started / f"{partition}-{number}").write_text(str(time.time()))
        time.sleep(seconds_first_attempt if number == 0 else seconds_later_attempts)
        return f"{partition}:{number}"

    frame = session.range(0, SERVER_CORES, 1, SERVER_CORES).select(F.spark_partition_id().alias("partition"))
    return sorted(row[0] for row in frame.select(F.udf(attempt, StringType())("partition")).collect())


def test_a_production_job_takes_the_cores_of_a_backfill_jobs_running_tasks_which_run_again(spark_resource, tmp_path):
    with pooled_sessions(spark_resource.connect_url(), tmp_path) as (
        backfill,
        production,
        backfill_started,
        production_started,
    ):
        ended: list[str] = []
        # Each first attempt would hold its core for 60 s: every core of the server.
        job = threading.Thread(target=lambda: ended.extend(attempts_then_result(backfill, 60, backfill_started)))
        job.start()

        def every_core_runs_a_backfill_task() -> bool:
            """the backfill job's first attempts all started"""
            return len(list(backfill_started.iterdir())) == SERVER_CORES

        wait_for(every_core_runs_a_backfill_task, timeout=60)
        submitted = time.time()
        production_starts = task_starts(production, SERVER_CORES, 0.1, production_started)
        production_done = time.time()
        job.join(timeout=120)
    # Production waited for no backfill task (a killed Python task's worker stops within 2 s) ...
    assert production_done - submitted < 20, (submitted, production_starts, production_done)
    # ... whose tasks were killed and run again, to the whole job's result.
    assert ended == [f"{partition}:1" for partition in range(SERVER_CORES)], ended


@contextmanager
def server_killing_a_task_at_most(kills: int, state_dir: Path) -> Iterator[str]:
    """A server of the test's own (local[2], as the shared one) whose listener kills one backfill
    task at most `kills` times; its sc:// URL, stopped after."""
    conf = {**spark_conf_from_env(), MAX_KILLS_PER_TASK_CONF: str(kills)}  # the shared server's JVM options
    server = LocalConnectServer(port=free_port(), master=f"local[{SERVER_CORES}]", conf=conf, state_dir=state_dir)
    try:
        yield server.ensure_running()
    finally:
        server.stop()


def test_a_backfill_task_killed_as_often_as_the_bound_allows_runs_to_its_end(tmp_path):
    with (
        server_killing_a_task_at_most(1, tmp_path / "state") as url,
        pooled_sessions(url, tmp_path) as (backfill, production, backfill_started, production_started),
    ):
        ended: list[str] = []
        # First attempts would hold every core for 60 s; the second ones, past the bound, for a few.
        job = threading.Thread(
            target=lambda: ended.extend(attempts_then_result(backfill, 60, backfill_started, SECONDS_PAST_THE_BOUND))
        )
        job.start()

        def attempts_started(number: int) -> Callable[[], bool]:
            def started() -> bool:
                return all((backfill_started / f"{partition}-{number}").exists() for partition in range(SERVER_CORES))

            started.__doc__ = f"every backfill task's attempt {number} started"
            return started

        wait_for(attempts_started(0), timeout=60)
        task_starts(production, SERVER_CORES, 0.1, production_started)  # kills each task once: its bound
        wait_for(attempts_started(1), timeout=60)
        second = tmp_path / "second_production_job"
        second.mkdir()
        submitted = time.time()
        second_starts = task_starts(production, SERVER_CORES, 0.1, second)
        job.join(timeout=120)
    # The tasks killed once ran to their end: production's next job waited for them (no third attempt) ...
    assert ended == [f"{partition}:1" for partition in range(SERVER_CORES)], ended
    assert not list(backfill_started.glob("*-2"))
    # ... its tasks starting once they ended, not as it came.
    backfill_ends = [
        float((backfill_started / f"{partition}-1").read_text()) + SECONDS_PAST_THE_BOUND
        for partition in range(SERVER_CORES)
    ]
    assert min(second_starts) > submitted and min(second_starts) >= min(backfill_ends) - 1, (second_starts, submitted)
