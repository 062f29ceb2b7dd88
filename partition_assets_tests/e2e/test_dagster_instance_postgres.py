"""The Dagster instance on PostgreSQL as README "Scaling out" configures it (the README shows
exactly this configuration: partition_assets_tests/unit/test_postgres_readme.py): a DAGSTER_HOME with it
stores runs and events in its own database on the session's throwaway server. (The engine,
sensor and webserver tests marked also_on_postgres run their cases on it.)"""

from contextlib import closing

import dagster as dg
import psycopg2
import pytest
from dagster_postgres import PostgresEventLogStorage, PostgresRunStorage, PostgresScheduleStorage

from partition_assets_tests.support.instances import instance_env, open_instance


@dg.asset(partitions_def=dg.DailyPartitionsDefinition("2024-01-01"))
def probe() -> None:
    pass


def runs_in(database_url: str) -> int:
    """Rows of Dagster's `runs` table, read with psycopg2 rather than through Dagster."""
    with closing(psycopg2.connect(database_url.replace("+psycopg2", ""))) as connection:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM runs")
            return cursor.fetchone()[0]


def test_a_postgres_home_keeps_the_instance_in_its_own_database(postgres_server, tmp_path):
    first, second = postgres_server.create_database(), postgres_server.create_database()
    with open_instance(instance_env(tmp_path / "first", first)) as instance:
        assert isinstance(instance.run_storage, PostgresRunStorage)
        assert isinstance(instance.event_log_storage, PostgresEventLogStorage)
        assert isinstance(instance.schedule_storage, PostgresScheduleStorage)
        assert dg.materialize([probe], partition_key="2024-01-02", instance=instance).success
        assert instance.get_materialized_partitions(probe.key) == {"2024-01-02"}
        # What a rollback meets (publishing/dagster_events.py reflect_rollback): it records an observation.
        with pytest.raises(NotImplementedError):
            instance.wipe_asset_partitions(probe.key, ["2024-01-02"])
    with open_instance(instance_env(tmp_path / "second", second)) as instance:
        assert instance.get_materialized_partitions(probe.key) == set()
    assert (runs_in(first), runs_in(second)) == (1, 0)
