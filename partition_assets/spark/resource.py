"""The SparkSession resource assets and IO managers share."""

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, cast

import dagster as dg
from dagster_pyspark import LazyPySparkResource
from pydantic import Field, PrivateAttr
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from partition_assets.dagster_instance.lease_proof import proven_backfill
from partition_assets.errors import PartitionAssetsError, SparkConfigError, SparkServerGoneError
from partition_assets.run_tags import BACKFILL_ID_TAG, is_backfill_run
from partition_assets.settings import on_or_off, whole_number
from partition_assets.spark.connect_server import (
    DEFAULT_PORT,
    DEFAULT_SPARK_CONF,
    LocalConnectServer,
    spark_env,
)
from partition_assets.spark.java import find_java
from partition_assets.spark.scheduler_pools import (
    BACKFILL_POOL,
    DEFAULT_TASKS_PER_CORE,
    POOL_CONF,
    POOL_ENV,
    PRODUCTION_POOL,
    backfill_slicing_conf,
    cores_of,
)
from partition_assets.spark.unreachable import DEFAULT_UNREACHABLE_SECONDS, listening, lost_server, unreachable_seconds

if TYPE_CHECKING:
    from pyspark.sql.connect.session import SparkSession as ConnectSession


TASKS_PER_CORE_ENV = "PARTITION_ASSETS_SPARK_BACKFILL_TASKS_PER_CORE"
PREEMPT_ENV = "PARTITION_ASSETS_SPARK_PREEMPT_BACKFILL_TASKS"


class SparkResource(LazyPySparkResource):
    """A SparkSession, created on first use.

    Three ways to get one, in order of precedence:
    - `remote="sc://host:port"`: attach to an existing Spark Connect server
      (a cluster's, or one started by `make dev`);
    - `in_process=True`: a classic driver JVM inside this process (needed for
      jars on the driver's classpath, e.g. Databricks' Delta writer);
    - otherwise: attach to the shared local Spark Connect server on
      `connect_port`, starting it (driver on `master`) if nobody has.

    A Spark Connect session gives up a call whose server it cannot reach (killed, gone
    from the network) `unreachable_seconds` after the call's first failure, rather than
    after Spark's own ten minutes and more (spark/unreachable.py).
    """

    spark_config: dict[str, Any] = Field(
        default_factory=dict, description="Spark conf; spark.sql.* keys apply per session."
    )
    remote: str | None = Field(default=None, description="Spark Connect URL, sc://host:port.")
    master: str = Field(default="local[2]", description="Driver master: local[N], spark://host:7077, k8s://...")
    in_process: bool = Field(default=False, description="Run a classic driver in this process.")
    connect_port: int = Field(default=DEFAULT_PORT, description="Port of the shared local server.")
    unreachable_seconds: float = Field(
        default=DEFAULT_UNREACHABLE_SECONDS,
        gt=0,
        description="Seconds a Spark Connect call retries a server it cannot reach before it fails.",
    )
    backfill_tasks_per_core: int = Field(
        default=DEFAULT_TASKS_PER_CORE,
        ge=0,
        description="A backfill session's scans run in at least this many tasks per server core, so that a "
        "production job waits at most one short task for a core (spark/scheduler_pools.py); 0 keeps Spark's.",
    )
    preempt_backfill_tasks: bool = Field(
        default=True,
        description="The local server this resource starts kills a backfill's running tasks when a production "
        "job needs their cores, and runs them again (spark/scheduler_pools.py); False leaves them running.",
    )
    _pool: str | None = PrivateAttr(default=None)  # set from the run by setup_for_execution
    _backfill_id: str | None = PrivateAttr(default=None)  # the backfill the run names, set there too

    @classmethod
    def from_env(cls) -> "SparkResource":
        """Configured by PARTITION_ASSETS_SPARK_{REMOTE,MASTER,IN_PROCESS,CONNECT_PORT,CONF,UNREACHABLE_SECONDS,
        BACKFILL_TASKS_PER_CORE,PREEMPT_BACKFILL_TASKS} (the last: `0` turns preemption off).

        PARTITION_ASSETS_SPARK_CONF is a JSON object of Spark settings (see
        `spark_conf_from_env`): it becomes `spark_config`.

        Raises:
            SparkConfigError: PARTITION_ASSETS_SPARK_CONF is not a JSON object, or holds a key not
                starting with `spark.` or a value that is no string, number or boolean; no Spark
                server was started.
            EnvironmentSetupError: PARTITION_ASSETS_SPARK_UNREACHABLE_SECONDS is set but not a
                positive number, PARTITION_ASSETS_SPARK_BACKFILL_TASKS_PER_CORE not a whole number >= 0, or
                PARTITION_ASSETS_SPARK_PREEMPT_BACKFILL_TASKS neither 0 nor 1.
        """
        return cls(
            spark_config=spark_conf_from_env(),
            remote=os.environ.get("PARTITION_ASSETS_SPARK_REMOTE") or None,
            master=os.environ.get("PARTITION_ASSETS_SPARK_MASTER", "local[2]"),
            in_process=os.environ.get("PARTITION_ASSETS_SPARK_IN_PROCESS", "") == "1",
            connect_port=int(os.environ.get("PARTITION_ASSETS_SPARK_CONNECT_PORT", DEFAULT_PORT)),
            unreachable_seconds=unreachable_seconds(),
            backfill_tasks_per_core=whole_number(TASKS_PER_CORE_ENV, DEFAULT_TASKS_PER_CORE),
            preempt_backfill_tasks=on_or_off(PREEMPT_ENV, True),
        )

    def local_server(self) -> LocalConnectServer:
        return LocalConnectServer(
            port=self.connect_port,
            master=self.master,
            conf=self._static_conf(),
            preempt_backfill_tasks=self.preempt_backfill_tasks,
        )

    def connect_url(self) -> str | None:
        """The sc:// URL of the Spark Connect server its sessions use; None for a driver in this process."""
        if self.in_process:
            return None
        return self.remote or self.local_server().url

    def gone_server(self) -> str | None:
        """The URL of its Spark Connect server when nothing listens there any more (killed,
        or gone from the network); None when one does, or for a driver in this process."""
        url = self.connect_url()
        return url if url is not None and not listening(url) else None

    @contextmanager
    def naming_a_gone_server(self) -> Iterator[None]:
        """Runs its block; a Spark error it raises because this resource's Spark Connect server is
        gone (nothing listens: killed) or was restarted under its session (Spark says only
        `[NO_ACTIVE_SESSION]`) becomes SparkServerGoneError naming the server and what runs the
        work again: `backfill resume <id>` for a backfill's node run (its run tags name the
        backfill), else the run again. Any other error passes unchanged. The session's own start
        (`spark_session`) runs in one.

        Not guaranteed: a Spark call made outside such a block (an asset's own eager call, such as
        `collect()`) raises Spark's error as it is.
        """
        try:
            yield
        except Exception as error:
            url = self.connect_url()
            if isinstance(error, PartitionAssetsError) or url is None:
                raise
            if not lost_server(error, url, self._session_closed()):
                raise
            raise SparkServerGoneError(self._gone_message(url, error)) from error

    def _session_closed(self) -> bool:
        """Whether its Connect session's client closed it (its server restarted under it)."""
        session = self._spark_session
        return session is not None and not self.in_process and cast("ConnectSession", session).is_stopped

    def _gone_message(self, url: str, error: Exception) -> str:
        backfill_id = self._backfill_id
        restarts = "the local server is started again by it" if not self.remote else f"start the server at {url} first"
        again = (
            f"This node runs again on `partition-assets backfill resume {backfill_id}` ({restarts})"
            if backfill_id is not None
            else "Run it again"
            + (" (a run starts the local server again)" if not self.remote else f" once the server at {url} runs")
        )
        spark_said = str(error).splitlines()[0][:200] if str(error) else type(error).__name__
        return (
            f"the Spark Connect server at {url} is gone or was restarted while this run used it (killed, or "
            f"unreachable; the session this run held on it is lost; Spark said: {spark_said}). This run's "
            f"output was not committed. {again}."
        )

    def _init_session(self) -> None:
        if self._spark_session is not None:
            return
        with self.naming_a_gone_server():
            self._spark_session = self._started_session()

    def _started_session(self) -> SparkSession:
        session = self._attached_session()
        try:
            self._configure(session)
        except PySparkException:
            if self.in_process or not cast("ConnectSession", session).is_stopped:
                raise
            # The process's Connect session, which its runs share, was on a server restarted since
            # its last run: the new server does not know it, and Spark's client closed it at the
            # first call. This run has done nothing on it yet: it takes a new one (getOrCreate
            # passes over a closed session).
            session = self._attached_session()
            self._configure(session)
        return session

    def _attached_session(self) -> SparkSession:
        if self.remote:
            session = self._connected(self.remote)
        elif self.in_process:
            os.environ.update(spark_env(find_java()))
            builder = SparkSession.builder.master(self.master)
            for key, value in {**DEFAULT_SPARK_CONF, **self.spark_config}.items():
                builder = builder.config(key, str(value))
            session = builder.getOrCreate()
        else:
            session = self._connected(self.local_server().ensure_running())
        return session

    def _configure(self, session: SparkSession) -> None:
        """Sets this resource's session conf and the FAIR pool of its run's kind."""
        for key, value in {**DEFAULT_SPARK_CONF, **self.spark_config}.items():
            if key.startswith("spark.sql."):
                session.conf.set(key, str(value))
        if not self.in_process:  # its jobs join their kind's FAIR pool on the server
            pool = self._pool or _pool_of_process()
            session.conf.set(POOL_CONF, pool)
            # A process's runs share its one Connect session: each run of either kind sets its own.
            slicing = backfill_slicing_conf(self._server_cores(session), self.backfill_tasks_per_core)
            for key, value in slicing.items():
                if pool == BACKFILL_POOL:
                    session.conf.set(key, value)
                else:
                    session.conf.unset(key)

    def _server_cores(self, session: SparkSession) -> int | None:
        """The cores of the server's master: the local server's from its master, a remote
        one's from its spark.default.parallelism, if its conf names it."""
        if not self.remote:
            return cores_of(self.master)
        named = session.conf.get("spark.default.parallelism", None) or ""
        return int(named) if named.isdigit() else None

    def _connected(self, url: str) -> SparkSession:
        """A Spark Connect session on `url` whose calls give up an unreachable server in time."""
        from partition_assets.spark.retry_policy import UnreachableFor  # grpc and pandas: only once connecting

        session = SparkSession.builder.remote(url).getOrCreate()
        cast("ConnectSession", session).client.set_retry_policies([UnreachableFor(self.unreachable_seconds)])
        return session

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        """Takes the FAIR pool of the run's kind (`scheduler_pool_of`), and the backfill its tags name."""
        run = context.dagster_run
        self._backfill_id = None if run is None else run.tags.get(BACKFILL_ID_TAG)
        self._pool = _pool_of_process() if run is None else scheduler_pool_of(context.instance, run)

    def _static_conf(self) -> dict[str, str]:
        return {key: str(value) for key, value in self.spark_config.items() if not key.startswith("spark.sql.")}


def scheduler_pool_of(instance: dg.DagsterInstance | None, run: dg.DagsterRun) -> str:
    """The FAIR pool the Spark jobs of `run` (in `instance`) join: the backfill pool for a run in
    a backfill's local worker, a node run its lease proof shows an engine backfill's, and a run
    of one of Dagster's own backfills (run_tags.py `is_backfill_run`); the production pool for
    every other run, one that only carries an engine backfill's id tag included (re-executed
    from the UI, typed in the Launchpad): it writes as production, so it runs as production,
    not in the pool whose tasks production preempts. The proof is checked without binding the
    run id (dagster_instance/lease_proof.py): the pool only steers, the IO manager binds."""
    if _pool_of_process() == BACKFILL_POOL:
        return BACKFILL_POOL
    proven = None if instance is None else proven_backfill(instance, run.run_id, run.tags, bind=False)
    return BACKFILL_POOL if is_backfill_run(run.tags, proven) else PRODUCTION_POOL


def _pool_of_process() -> str:
    """The FAIR pool of this process's runs: a backfill's local worker sets POOL_ENV."""
    return BACKFILL_POOL if os.environ.get(POOL_ENV) == BACKFILL_POOL else PRODUCTION_POOL


def spark_conf_from_env() -> dict[str, str]:
    """PARTITION_ASSETS_SPARK_CONF, a JSON object such as
    `{"spark.executor.memory": "4g", "spark.cores.max": 8}`, as Spark conf strings.

    Keys must start with `spark.`; values must be strings, numbers or booleans
    (numbers and booleans are written as JSON writes them: `8`, `true`). Unset
    or empty means no settings.

    Raises:
        SparkConfigError: PARTITION_ASSETS_SPARK_CONF is not a JSON object, or holds a key not
            starting with `spark.` or a value that is no string, number or boolean; no Spark
            server was started.
    """
    text = os.environ.get("PARTITION_ASSETS_SPARK_CONF", "").strip()
    if not text:
        return {}
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as error:
        raise SparkConfigError(
            f"PARTITION_ASSETS_SPARK_CONF={text!r} is not JSON ({error}): give an object, "
            'e.g. {"spark.executor.memory": "4g"}; no Spark server was started'
        ) from None
    if not isinstance(parsed, dict):
        raise SparkConfigError(
            f"PARTITION_ASSETS_SPARK_CONF={text!r} is a JSON {type(parsed).__name__}, not an object: "
            'give key/value pairs, e.g. {"spark.executor.memory": "4g"}; no Spark server was started'
        )
    bad = {key: value for key, value in parsed.items() if not key.startswith("spark.") or not _is_scalar(value)}
    if bad:
        raise SparkConfigError(
            f"PARTITION_ASSETS_SPARK_CONF has settings Spark cannot take: {bad}. Keys start with "
            "'spark.' and values are strings, numbers or booleans; no Spark server was started"
        )
    return {key: value if isinstance(value, str) else json.dumps(value) for key, value in parsed.items()}


def _is_scalar(value: Any) -> bool:
    return isinstance(value, str | int | float | bool)
