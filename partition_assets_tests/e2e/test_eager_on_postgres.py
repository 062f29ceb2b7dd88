"""The eager sensor on PostgreSQL: an event that commits after a higher-numbered one was read
is acted on (partition_assets_tests/unit/test_eager.py evaluates the sensor's decisions)."""

from concurrent.futures import ThreadPoolExecutor
from contextlib import closing

import dagster as dg
import psycopg2

from partition_assets.automation import eager_partitions_sensor
from partition_assets_tests.support.instances import instance_env, open_instance
from partition_assets_tests.support.locations import automation_defs
from partition_assets_tests.support.polling import wait_for

HOLD_INSERT_OF_2024_01_05 = """
CREATE FUNCTION wait_for_lock_1() RETURNS trigger LANGUAGE plpgsql AS
    $$ BEGIN PERFORM pg_advisory_xact_lock(1); RETURN NEW; END $$;
CREATE TRIGGER hold_2024_01_05 BEFORE INSERT ON event_logs FOR EACH ROW
    WHEN (NEW.partition = '2024-01-05') EXECUTE FUNCTION wait_for_lock_1();
"""


def test_an_event_committed_after_a_higher_numbered_one_was_read_is_acted_on(postgres_server, tmp_path):
    database_url = postgres_server.create_database()
    sensor = eager_partitions_sensor("group:eager", watch_seconds=0)
    state = {"cursor": None}

    def tick() -> set[tuple[str, str | None]]:
        context = dg.build_sensor_context(instance=instance, cursor=state["cursor"], definitions=automation_defs.defs)
        result = sensor(context)
        state["cursor"] = result.cursor
        return {(k.to_user_string(), r.partition_key) for r in result.run_requests for k in r.asset_selection}

    def insert_waits_for_lock_1() -> bool:
        """An insert into event_logs waits in the trigger, its id taken."""
        sql.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND wait_event = 'advisory'")
        return sql.fetchone()[0] == 1

    # The writer joins after the holder's connection closes: a failing assertion frees it.
    with (
        open_instance(instance_env(tmp_path / "home", database_url)) as instance,
        ThreadPoolExecutor(1) as writer,
        closing(psycopg2.connect(database_url.replace("+psycopg2", ""))) as holder,
        holder.cursor() as sql,
    ):
        holder.autocommit = True
        assert tick() == set()  # places the cursor
        sql.execute(HOLD_INSERT_OF_2024_01_05)
        sql.execute("SELECT pg_advisory_lock(1)")
        # Dagster's own write path, in a thread: numbered first, committed last.
        late = writer.submit(
            instance.report_runless_asset_event, dg.AssetMaterialization("eager_up", partition="2024-01-05")
        )
        wait_for(insert_waits_for_lock_1, timeout=30)
        instance.report_runless_asset_event(dg.AssetMaterialization("eager_up", partition="2024-01-06"))
        # eager_pair[2024-01-06] reads 2024-01-05 too, not committed yet.
        assert tick() == {("eager_down", "2024-01-06")}
        sql.execute("SELECT pg_advisory_unlock(1)")
        late.result(timeout=30)
        ids = {
            r.partition_key: r.storage_id
            for r in instance.fetch_materializations(dg.AssetKey("eager_up"), limit=2).records
        }
        assert ids["2024-01-05"] < ids["2024-01-06"]  # committed out of id order
        assert tick() == {("eager_down", "2024-01-05"), ("eager_pair", "2024-01-06")}
        assert tick() == set()  # each event is acted on once
