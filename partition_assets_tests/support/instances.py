"""DAGSTER_HOMEs for tests and benchmarks: the repo's dagster.yaml on SQLite (the default) or
on PostgreSQL with exactly the configuration README "Scaling out" shows; running a test on
both (also_on_postgres); and temporary instances for a test's own process.

Not guaranteed: that the Postgres database exists or is reachable (see postgres.py for a
throwaway server); the instance only connects when it is opened.
"""

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import dagster as dg
import pytest
import yaml

from partition_assets.dagster_instance.storage import instance_storage_defaults
from partition_assets_tests.support import REPO

URL_ENV = "DAGSTER_PG_URL"
# README "Scaling out" shows this block verbatim (unit/test_postgres_readme.py checks it).
POSTGRES_STORAGE_YAML = """\
storage:
  postgres:
    postgres_url: { env: DAGSTER_PG_URL }
"""


def instance_env(home: Path, postgres_url: str | None = None) -> dict[str, str]:
    """Creates `home` as a DAGSTER_HOME with the repo's dagster.yaml, plus the Postgres
    storage when `postgres_url` is given; returns the environment a process needs to open
    that instance (DAGSTER_HOME, and DAGSTER_PG_URL for Postgres)."""
    home.mkdir(parents=True, exist_ok=True)
    config = (REPO / "dagster.yaml").read_text()
    if postgres_url is None:
        (home / "dagster.yaml").write_text(config)
        return {"DAGSTER_HOME": str(home)}
    (home / "dagster.yaml").write_text(config + POSTGRES_STORAGE_YAML)
    return {"DAGSTER_HOME": str(home), URL_ENV: postgres_url}


def add_to_config(home: Path, **sections: object) -> None:
    """Sets top-level `sections` of the dagster.yaml at `home` (as instance_env wrote it)."""
    config = yaml.safe_load((home / "dagster.yaml").read_text())
    (home / "dagster.yaml").write_text(yaml.safe_dump({**config, **sections}))


def temporary_instance(root: Path) -> AbstractContextManager[dg.DagsterInstance]:
    """Dagster's test instance (SQLite) at `root`, on the storages the repo's dagster.yaml
    gives an instance (partition_assets.dagster_instance.storage): every run's events in one
    consolidated database and runs in one, each through one SQLAlchemy engine, and a run's
    output captured without helper processes. Dagster's test defaults create a database per
    run and an engine per transaction: for a run that materializes a month of hourly
    partitions, most of its seconds. `root` may hold a copy of another such instance: its
    storage, schema included, is kept."""
    defaults = instance_storage_defaults(str(root))
    overrides = {}
    for name in ("run_storage", "event_log_storage", "compute_logs"):
        data = defaults[name]
        assert data is not None  # the repo's defaults name each of them
        overrides[name] = {
            "module": data.module_name,
            "class": data.class_name,
            "config": yaml.safe_load(data.config_yaml),
        }
    return dg.instance_for_test(temp_dir=str(root), overrides=overrides)


@contextmanager
def open_instance(env: dict[str, str]) -> Iterator[dg.DagsterInstance]:
    """The instance `env` (from instance_env) names; inside the block the environment names
    it too, for the processes a test starts."""
    with pytest.MonkeyPatch.context() as environment:
        for name, value in env.items():
            environment.setenv(name, value)
        with dg.DagsterInstance.get() as instance:
            yield instance


# The params of an instance fixture: SQLite unless a test is marked also_on_postgres.
ON_SQLITE = ["sqlite"]


def also_on_postgres(instance_fixture: str):
    """Runs a test on its usual SQLite instance and again on PostgreSQL. `instance_fixture`
    opens its instance on `postgres_url_for(request)`; a module-scoped one declares
    `params=ON_SQLITE` (so every test of the module carries the param, and pytest groups
    them: it is set up once for SQLite, once for Postgres)."""
    return pytest.mark.parametrize(instance_fixture, ["sqlite", "postgres"], indirect=True)


def postgres_url_for(request: pytest.FixtureRequest) -> str | None:
    """For an instance fixture: the URL of a fresh database on the session's PostgreSQL
    server when the test runs on Postgres (see also_on_postgres), else None (SQLite)."""
    if getattr(request, "param", "sqlite") != "postgres":
        return None
    return request.getfixturevalue("postgres_server").create_database()
