"""The Dagster backfill mirror's tick costs what changed, not the backfill's size (issue 27):
on a real instance of the repo's dagster.yaml, a mirror of 40 assets told that one asset
progressed serializes that asset's subsets and no other, writes the row once, and never
reads the whole record back; a tick with nothing new writes nothing. What it wrote is read
back through Dagster's own `get_backfill`, as the webserver's backfill page reads it.
Counted, not timed: per-asset subsets serialized (backfill_body.py) and SQL statements.
Its thread outlives a restart of the instance's Postgres."""

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import dagster as dg
import pytest
import sqlalchemy

from partition_assets.backfill.dagster_ui.mirror import DagsterBackfillMirror
from partition_assets.backfill.model import Node, NodeResult, RunUnit
from partition_assets.backfill.planning.graph import plan
from partition_assets.backfill.planning.spec import BackfillSpec
from partition_assets.backfill.state.record import BackfillRecord
from partition_assets.backfill.state.store import BackfillStore
from partition_assets.dagster_instance.storage import keep_connections
from partition_assets.dagster_internals import BulkActionStatus
from partition_assets.partitions import daily
from partition_assets_tests.support.instances import also_on_postgres, instance_env, open_instance
from partition_assets_tests.support.polling import wait_for
from partition_assets_tests.support.postgres import PostgresServer

ASSETS = 40
DAYS = [f"2024-01-{day:02d}" for day in range(1, 11)]
DAILY = daily("2024-01-01")


def _asset(index: int) -> dg.AssetsDefinition:
    @dg.asset(name=f"table_{index}", partitions_def=DAILY)
    def body() -> None:
        """Never run: the mirror is told of runs, it does not watch them."""

    return body


DEFINITIONS = dg.Definitions(assets=[_asset(index) for index in range(ASSETS)])
SPEC = BackfillSpec(module=__name__, selection="*", start=DAYS[0], end=DAYS[-1])


class Statements(Counter):
    """SQL statements on the instance's storages, by kind: `update` of the backfill row,
    `status` reads of it alone, `body` reads of the whole record."""

    def listen(self, conn, cursor, statement, parameters, context, executemany) -> None:
        text = " ".join(statement.split()).lower()
        if "bulk_actions" not in text:
            return
        if text.startswith("update bulk_actions"):
            self["update"] += 1
        elif "bulk_actions.body" in text:
            self["body"] += 1
        elif text.startswith("select bulk_actions.status"):
            self["status"] += 1


@contextmanager
def counted() -> Iterator[Statements]:
    statements = Statements()
    sqlalchemy.event.listen(sqlalchemy.engine.Engine, "before_cursor_execute", statements.listen)
    try:
        yield statements
    finally:
        sqlalchemy.event.remove(sqlalchemy.engine.Engine, "before_cursor_execute", statements.listen)


def shown(instance: dg.DagsterInstance, backfill_id: str) -> dict[str, tuple[int, int]]:
    """Per asset: (targeted, materialized), as Dagster computes them for the backfill page."""
    asset_graph = DEFINITIONS.resolve_asset_graph()
    data = instance.get_backfill(backfill_id).get_asset_backfill_data(asset_graph)
    return {
        status.asset_key.to_user_string(): (
            status.num_targeted_partitions,
            sum(count for state, count in status.partitions_counts_by_status.items() if state.value == "MATERIALIZED"),
        )
        for status in data.get_backfill_status_per_asset_key(asset_graph)
    }


@pytest.fixture
def mirrored(home) -> Iterator[tuple[dg.DagsterInstance, DagsterBackfillMirror, str]]:
    asset_graph = DEFINITIONS.resolve_asset_graph()
    with dg.DagsterInstance.get() as instance:
        record = BackfillRecord(SPEC, store=BackfillStore(instance))
        record.save()
        with DagsterBackfillMirror(record, plan(asset_graph, SPEC), asset_graph, instance, done=()) as mirror:
            yield instance, mirror, record.id


@also_on_postgres("home")
def test_a_tick_serializes_and_writes_what_changed_not_the_whole_backfill(mirrored):
    instance, mirror, backfill_id = mirrored
    assert shown(instance, backfill_id) == {f"table_{index}": (len(DAYS), 0) for index in range(ASSETS)}
    serialized = mirror.body.serialized_subsets

    with counted() as statements:
        mirror.launched(RunUnit(dg.AssetKey("table_7"), tuple(DAYS[:4])))
        for day in DAYS[:4]:
            mirror.finished(NodeResult(Node(dg.AssetKey("table_7"), day), True, "run-7", 0.0, 0.0))
        wait_for(lambda: statements["update"] >= 1, 10)
        ticks = statements["status"]
        wait_for(lambda: statements["status"] >= ticks + 2, 10)  # two more ticks, with nothing new

    # table_7's requested and materialized partitions (the same 4 days: one subset, serialized once
    # or twice); none of the 39 other assets', nor the target.
    assert 1 <= mirror.body.serialized_subsets - serialized <= 2
    assert statements["update"] == 1 and statements["body"] == 0, statements
    progress = shown(instance, backfill_id)
    assert progress.pop("table_7") == (len(DAYS), 4)
    assert progress == {f"table_{index}": (len(DAYS), 0) for index in range(ASSETS) if index != 7}


def test_a_cancel_clicked_between_ticks_is_kept_by_the_next_write(mirrored):
    """The UI's *Cancel* writes the whole record with CANCELING; the mirror's writes of progress
    afterwards keep that status (the coordinator cancels on it)."""
    instance, mirror, backfill_id = mirrored
    instance.update_backfill(instance.get_backfill(backfill_id).with_status(BulkActionStatus.CANCELING))
    mirror.finished(NodeResult(Node(dg.AssetKey("table_3"), DAYS[0]), True, "run-3", 0.0, 0.0))

    wait_for(lambda: shown(instance, backfill_id)["table_3"] == (len(DAYS), 1), 10)

    assert instance.get_backfill(backfill_id).status == BulkActionStatus.CANCELING


def test_the_mirror_thread_outlives_a_postgres_restart(tmp_path, caplog):
    """Issue 55, found by the soak (bench/soak/): the mirror thread died on a tick that failed
    while Postgres restarted (`Exception in thread dagster-backfill-...`), leaving the UI's
    backfill stale. Its ticks fail while the server is away (Dagster gives up connecting
    after ~6 s); the thread logs it once and writes what progressed once the server is back.
    A server of its own: the session's is shared."""
    asset_graph = DEFINITIONS.resolve_asset_graph()
    with (
        PostgresServer() as server,
        open_instance(instance_env(tmp_path / "pg", server.create_database())) as instance,
    ):
        keep_connections(instance)  # as the coordinator's instance
        record = BackfillRecord(SPEC, store=BackfillStore(instance))
        record.save()
        with DagsterBackfillMirror(record, plan(asset_graph, SPEC), asset_graph, instance, done=()) as mirror:
            thread = mirror._thread
            server.crash()
            wait_for(lambda: "its Dagster backfill was not updated" in caplog.text or not thread.is_alive(), 60)
            server.start_again()
            mirror.finished(NodeResult(Node(dg.AssetKey("table_3"), DAYS[0]), True, "run-3", 0.0, 0.0))
            assert thread.is_alive(), "the mirror thread died while Postgres restarted"
            wait_for(lambda: shown(instance, record.id)["table_3"] == (len(DAYS), 1), 60)
    assert caplog.text.count("its Dagster backfill was not updated") == 1
    assert "its Dagster backfill is updated again" in caplog.text
