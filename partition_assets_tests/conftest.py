"""Fixtures shared by every tier, one per real component: the test session's Spark Connect
server (started by the first test that needs it), a throwaway PostgreSQL server likewise, a
fresh lake folder, Dagster instances (a temporary one for this process; a DAGSTER_HOME for
the processes a test starts, on SQLite or, for tests marked also_on_postgres, on Postgres;
SQLite ones are copies of a template whose storage was created once) and materializing
assets into them.

The tiers, each a folder: partition_assets_tests/unit (logic and fakes in this process; no Spark, no
process: its conftest fails a test that starts either), partition_assets_tests/integration (this process
against real Spark, Delta tables, Dagster instances on disk and git, and the processes it
starts through the library or as Python helpers: the engine's workers, Spark Connect
servers, writers killed at a failpoint, racing processes) and partition_assets_tests/e2e (what a user
starts: `partition-assets` and `dagster` commands, `dagster dev` with Chromium, servers run
by their own commands (PostgreSQL, moto's S3, a Spark standalone cluster), the run
launcher, deploys) and partition_assets_tests/conformance (a user's small project backfilled
twice on fresh instances, by the engine and by Dagster's own command, and what each instance
and storage holds compared: the engine follows Dagster's rules; docs/guarantees.md "Dagster's
semantics"). partition_assets_tests/support holds the helpers, support/locations the code
locations the tests load. A test file is named after the module or command it tests
(`test_<module>.py`), each name in one tier only (unit/test_tiers.py checks both).
Every temporary folder (tmp_path, the DAGSTER_HOMEs, lakes, the PostgreSQL data folder) is
on /dev/shm when it is a writable tmpfs with room to spare (PARTITION_ASSETS_TEST_TMP names
another root; set it to /tmp to test on disk): Dagster's SQLite storages commit with fsync,
which takes 3-20 ms a commit on this machine's disk against well under 1 ms in memory, and
a backfill writes thousands of events. Nothing here tests durability across a power loss:
the crash tests kill processes, whose writes the kernel keeps either way.
Not guaranteed: isolation beyond a test's own folders and instances: every test shares the
session's Spark server and state folder, and the PostgreSQL server.
"""

import json
import os
import shutil
import signal
import tempfile
from pathlib import Path

import dagster as dg
import pytest

from partition_assets_tests.support.temp_root import session_temp_dir

os.environ["TMPDIR"] = session_temp_dir()
# A `make test` started in the background of a non-interactive shell (`&` in a script) runs
# with SIGINT ignored, and each in-process Dagster execution then sets SIGTERM to SIGINT's
# disposition (partition_assets/processes/detached.py): every process a test starts itself
# (dagster dev, a Spark cluster) would ignore the SIGTERM its fixture stops it with, and
# wait out the fixture's timeout. Ctrl-C and SIGTERM keep working as in a foreground run.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
# Set before the example code location is imported, and inherited by every
# subprocess a test starts (the dagster CLI, dagster dev), so that all of them
# attach to the test session's Spark server rather than a developer's.
# Each pytest-xdist worker (gw0, gw1, ...) has a Spark server of its own, 20 ports apart
# (the tests' own servers use the ports just above the session's).
os.environ["PARTITION_ASSETS_SPARK_CONNECT_PORT"] = str(
    int(os.environ.get("PARTITION_ASSETS_TEST_SPARK_PORT", "15102"))
    + 20 * int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw"))
)
os.environ["PARTITION_ASSETS_STATE_DIR"] = tempfile.mkdtemp(prefix="partition-assets-state-")
# The shared server is always local[2] with the default conf, whatever the developer's shell
# says, its JVM compiling with C1 only and collecting with the serial GC: on two cores, C2's
# compiler threads took a quarter of the server's CPU over the Spark-heaviest integration
# files (server CPU 108.6 s -> 78.0 s, its start-up 10.1 s -> 5.4 s, from one run each of
# partition_assets_tests/integration/test_example_pipeline.py, test_io_manager.py, test_delta_contract.py).
# What runs on it is unchanged; the product's own default keeps the JVM's (benchmarks use it).
os.environ.pop("PARTITION_ASSETS_SPARK_REMOTE", None)
os.environ.pop("PARTITION_ASSETS_SPARK_MASTER", None)
os.environ["PARTITION_ASSETS_SPARK_CONF"] = json.dumps(
    {"spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"}
)

from partition_assets.spark import SparkResource
from partition_assets.storage import SparkDeltaIOManager
from partition_assets_tests.support.instances import instance_env, postgres_url_for, temporary_instance
from partition_assets_tests.support.postgres import PostgresServer


@pytest.fixture(scope="session")
def spark_resource():
    resource = SparkResource.from_env()
    server = resource.local_server()
    started_here = not server.is_running()
    server.ensure_running()
    yield resource
    # Close the client first: at exit it would otherwise retry a stopped server for minutes.
    resource.spark_session.stop()
    if started_here:
        server.stop()


@pytest.fixture(scope="session")
def spark(spark_resource):
    return spark_resource.spark_session


@pytest.fixture(scope="session")
def postgres_server():
    """One throwaway PostgreSQL server for the session, started by the first test that needs it."""
    with PostgresServer() as server:
        yield server


@pytest.fixture
def lake(tmp_path) -> Path:
    path = tmp_path / "lake"
    path.mkdir()
    return path


@pytest.fixture(scope="session")
def instance_template(tmp_path_factory) -> Path:
    """A temporary instance's folder with its storage created once: its schema migrations
    take seconds, a copy of the folder milliseconds."""
    root = tmp_path_factory.mktemp("instance_template")
    with temporary_instance(root):
        pass
    return root


@pytest.fixture
def instance(instance_template, tmp_path):
    """A temporary Dagster instance of this test's own (SQLite under tmp_path), for this process."""
    root = tmp_path / "instance"
    shutil.copytree(instance_template, root)
    with temporary_instance(root) as test_instance:
        yield test_instance


@pytest.fixture(scope="session")
def home_template(tmp_path_factory) -> Path:
    """A DAGSTER_HOME with the repo's dagster.yaml whose SQLite storage is created once (its
    schema migrations take seconds, a copy of the folder milliseconds)."""
    template = tmp_path_factory.mktemp("home_template") / "dagster_home"
    instance_env(template)
    with dg.DagsterInstance.from_config(str(template)):
        pass
    return template


@pytest.fixture
def home(request, home_template, tmp_path, monkeypatch) -> Path:
    """A DAGSTER_HOME with the repo's dagster.yaml (a user's `make dev` setup) and its instance
    created, set for this test and the processes it starts; on a fresh PostgreSQL database
    for tests marked also_on_postgres("home")."""
    home = tmp_path / "dagster_home"
    postgres_url = postgres_url_for(request)
    if postgres_url is None:
        shutil.copytree(home_template, home)
    env = instance_env(home, postgres_url)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return home


@pytest.fixture
def run_assets(spark_resource, lake, instance):
    """Materializes any assets through Dagster into this test's lake and instance."""

    def run(assets, selection, io_manager=SparkDeltaIOManager, **kwargs):
        kwargs.setdefault("raise_on_error", False)
        return dg.materialize(
            assets,
            selection=selection,
            instance=instance,
            resources={
                "spark": spark_resource,
                "io_manager": io_manager(root_uri=str(lake), spark=spark_resource),
            },
            **kwargs,
        )

    return run


# The files whose tests take longest (minutes each under two workers, module fixtures
# included), longest first: pytest-xdist hands files out in collection order when told
# --no-loadscope-reorder (the Makefile's test-all; its default orders them by their number of
# tests), a worker taking the next file once it has at most 2 tests left, so a long file
# collected late would run alone at the end while the other worker idles. Order measured
# from one whole run (issue 44); the longest files are split in two (test_launcher,
# test_backfill_publish), so that no one file holds a worker for much of the run.
LONGEST_FIRST = (
    "partition_assets_tests/e2e/test_backfill_publish.py",
    "partition_assets_tests/e2e/test_stages.py",
    "partition_assets_tests/e2e/test_launcher.py",
    "partition_assets_tests/e2e/test_backfill_resume.py",
    "partition_assets_tests/e2e/test_soak.py",
    "partition_assets_tests/e2e/test_upgrade_mid_backfill.py",
    "partition_assets_tests/e2e/test_launcher_coordinator.py",
    "partition_assets_tests/e2e/test_backfill_run_history.py",
    "partition_assets_tests/e2e/test_dagster_ui_webserver.py",
    "partition_assets_tests/e2e/test_automation.py",
    "partition_assets_tests/e2e/test_backfill_approve.py",
    "partition_assets_tests/e2e/test_shell.py",
)


def pytest_collection_modifyitems(config, items):
    def rank(item) -> int:
        path = item.path.relative_to(config.rootpath).as_posix()
        return LONGEST_FIRST.index(path) if path in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: the other files keep their order


def pytest_sessionfinish(session, exitstatus):
    """Stops this process's Spark server, whoever started it (the fixture, or a CLI run a
    test started, which attaches to the same port and state folder), and removes the state
    folder (the server's pid file and log): under /dev/shm both outlived every session."""
    SparkResource.from_env().local_server().stop()  # signals only the server its pid file names
    shutil.rmtree(os.environ["PARTITION_ASSETS_STATE_DIR"], ignore_errors=True)
