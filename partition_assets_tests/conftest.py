"""Shared fixtures: one Spark Connect server for the whole test session, real Dagster
instances (SQLite in a temp dir; for tests marked `also_on_postgres`, also a fresh database
on the session's throwaway PostgreSQL server) and a fresh lake folder per test."""

import os
import tempfile
import time
from pathlib import Path

import dagster as dg
import pytest
from deltalake import DeltaTable

# Set before the example code location is imported, and inherited by every
# subprocess a test starts (the dagster CLI, dagster dev), so that all of them
# attach to the test session's Spark server rather than a developer's.
os.environ["PARTITION_ASSETS_SPARK_CONNECT_PORT"] = os.environ.get("PARTITION_ASSETS_TEST_SPARK_PORT", "15102")
os.environ["PARTITION_ASSETS_STATE_DIR"] = tempfile.mkdtemp(prefix="partition-assets-state-")
# The shared server is always local[2] with the default conf, whatever the developer's shell says.
os.environ.pop("PARTITION_ASSETS_SPARK_REMOTE", None)
os.environ.pop("PARTITION_ASSETS_SPARK_MASTER", None)
os.environ.pop("PARTITION_ASSETS_SPARK_CONF", None)

from partition_assets.example import assets as example_assets
from partition_assets.spark import SparkResource
from partition_assets.storage import SparkDeltaIOManager
from partition_assets_tests.postgres import PostgresServer

EXAMPLE_ASSETS = dg.load_assets_from_modules([example_assets])

# The staged-backfill lakehouse fixtures (published days to copy), for every module.
pytest_plugins = ["partition_assets_tests.lakehouse"]


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


# The params of an instance fixture: SQLite unless a test is marked also_on_postgres.
ON_SQLITE = ["sqlite"]


def also_on_postgres(instance_fixture: str):
    """Runs a test on its usual SQLite instance and again on PostgreSQL. `instance_fixture`
    declares `params=ON_SQLITE` (so every test of the module carries the param, and pytest
    groups them: a module-scoped fixture is set up once for SQLite, once for Postgres) and
    opens its instance on `postgres_url_for(request)`."""
    return pytest.mark.parametrize(instance_fixture, ["sqlite", "postgres"], indirect=True)


def postgres_url_for(request) -> str | None:
    """For an instance fixture: the URL of a fresh database on the session's PostgreSQL
    server when the test runs on Postgres (see also_on_postgres), else None (SQLite)."""
    if request.param != "postgres":
        return None
    return request.getfixturevalue("postgres_server").create_database()


@pytest.fixture
def lake(tmp_path) -> Path:
    path = tmp_path / "lake"
    path.mkdir()
    return path


@pytest.fixture
def instance():
    with dg.instance_for_test() as test_instance:
        yield test_instance


@pytest.fixture
def materialize(run_assets):
    """Materializes example assets (a key or a (first, last) range) and fails loudly."""

    def run(selection, partition_key=None, partition_range=None):
        return run_assets(
            EXAMPLE_ASSETS,
            selection,
            partition_key=partition_key,
            tags=range_tags(*partition_range) if partition_range else {},
            raise_on_error=True,
        )

    return run


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


def range_tags(first: str, last: str) -> dict[str, str]:
    return {
        "dagster/asset_partition_range_start": first,
        "dagster/asset_partition_range_end": last,
    }


def failure_message(result) -> str:
    failures = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    assert failures, "the run was expected to fail"
    return failures[0].event_specific_data.error.to_string()


def backdate(root: Path, hours: float) -> None:
    """Dates `root` and every file and folder under it `hours` back, the Delta log aside:
    old enough for a vacuum, whose retention is at least an hour, to delete what no
    reader sees. The log keeps its own times."""
    when = time.time() - hours * 3600
    for path in [root, *root.rglob("*")]:
        if "_delta_log" not in path.relative_to(root).parts:
            os.utime(path, (when, when))


def files_of_every_version(table_uri: str) -> set[str]:
    """The data files some version of the Delta table references: the live ones, and the
    replaced ones a vacuum keeps until their removal is older than the retention."""
    latest = DeltaTable(table_uri).version()
    return {path for version in range(latest + 1) for path in DeltaTable(table_uri, version=version).file_uris()}
