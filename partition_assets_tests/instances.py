"""DAGSTER_HOMEs for tests and benchmarks: the repo's dagster.yaml on SQLite (the default) or
on PostgreSQL with exactly the configuration README "Scaling out" shows.

Not guaranteed: that the Postgres database exists or is reachable (see postgres.py for a
throwaway server); the instance only connects when it is opened.
"""

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
import pytest

REPO = Path(__file__).resolve().parents[1]
URL_ENV = "DAGSTER_PG_URL"
# README "Scaling out" shows this block verbatim (test_postgres_instance checks it).
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


@contextmanager
def open_instance(env: dict[str, str]) -> Iterator[dg.DagsterInstance]:
    """The instance `env` (from instance_env) names; inside the block the environment names
    it too, for the processes a test starts."""
    with pytest.MonkeyPatch.context() as environment:
        for name, value in env.items():
            environment.setenv(name, value)
        with dg.DagsterInstance.get() as instance:
            yield instance
