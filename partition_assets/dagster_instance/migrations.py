"""Dagster's schema migration scripts read once per process, not once per database opened.

The first time a process opens one of Dagster's SQL databases, its storage checks the
database's schema revision against the newest migration script (`check_alembic_revision`)
and stamps a new database with it (`stamp_alembic_rev`); alembic builds its
`ScriptDirectory` for each: every migration script of Dagster read and compiled, ~80 ms of
CPU. Dagster's default event log (no dagster.yaml) keeps a SQLite database per run, so each
node run paid it twice (its worker opens the run's new database) and a publish once per node
run whose outputs it reads: 11 of the 12.7 s of an empty publish of 125 nodes, most of a
node run's CPU on that instance (bench/results/engine_instances.md).

`remember_dagster_migrations()` has alembic's `ScriptDirectory.from_config` return, for a
config of Dagster's scripts (`ALEMBIC_SCRIPTS_LOCATION`, per alembic.ini), the directory it
built the first time in this process, its revision map read once. Any other config (a user's
own alembic scripts) is built as before. Idempotent; forked processes inherit it.

Not guaranteed: migration scripts changed on disk while a process runs (Dagster upgraded
under it) are not seen until the process restarts, as Dagster's own code already imported
is not. Relies on Dagster's storages building their script directory through
`ScriptDirectory.from_config` with a config naming `ALEMBIC_SCRIPTS_LOCATION` (pinned by
partition_assets_tests/integration/test_dagster_internals.py).
"""

import threading
from typing import Any

from alembic.config import Config
from alembic.script import ScriptDirectory

from partition_assets.dagster_internals import ALEMBIC_SCRIPTS_LOCATION

_build = ScriptDirectory.from_config.__func__  # type: ignore[attr-defined]  # alembic's own, unbound
_built: dict[tuple[str, str | None], ScriptDirectory] = {}
_lock = threading.Lock()


def _from_config(cls: type[ScriptDirectory], config: Config) -> ScriptDirectory:
    """alembic's `ScriptDirectory.from_config`, remembered for Dagster's scripts."""
    if config.get_main_option("script_location") != ALEMBIC_SCRIPTS_LOCATION:
        return _build(cls, config)
    key = (ALEMBIC_SCRIPTS_LOCATION, config.config_file_name)
    with _lock:
        if key not in _built:
            _built[key] = _build(cls, config)
        return _built[key]


def remember_dagster_migrations() -> None:
    """Makes this process build the script directory of Dagster's migrations once (module docstring)."""
    from_config: Any = _from_config
    ScriptDirectory.from_config = classmethod(from_config)  # type: ignore[method-assign, assignment]
