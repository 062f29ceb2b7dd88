"""A staged backfill with nothing to publish (no asset stored by this library) still records
its nodes' materializations in one publish run, in a few instance round trips however many
runs it ran: the runs' outputs are read in a few queries, not one per run.

Each backfill runs through the real coordinator, workers and instance; the SQL statements
of its publish are counted as they happen (every engine's, the coordinator's other threads
included: the count is compared across sizes, not pinned)."""

import shutil
from collections import Counter

import dagster as dg
import pytest
import sqlalchemy

from partition_assets.backfill.planning.instance_state import graph_of
from partition_assets.backfill.planning.spec import BackfillSpec
from partition_assets.backfill.publishing import publish as publish_module
from partition_assets.backfill.publishing.dagster_events import PUBLISH_RUN_TAG
from partition_assets.backfill.running.coordinator import BackfillRun
from partition_assets.backfill.running.scheduling import NodeStatus
from partition_assets.backfill.state.record import BackfillRecord
from partition_assets.backfill.state.store import BackfillStore
from partition_assets.run_tags import BACKFILL_ID_TAG
from tests.support.instances import instance_env

CODE_LOCATION = "tests.support.no_table_defs"
ASSETS = 2


def _publish(days: int, home_template, tmp_path) -> tuple[int, int, Counter]:
    """Runs a staged backfill of every asset over `days` days (a run per node) on a fresh
    instance: (SQL statements of its publish, node runs, materializations the publish run recorded)."""
    home = tmp_path / f"home_{days}"
    shutil.copytree(home_template, home)
    statements = 0

    def count(*_: object) -> None:
        nonlocal statements
        statements += 1

    real_publish = publish_module.publish

    def counted_publish(publication, instance, force=False):
        sqlalchemy.event.listen(sqlalchemy.engine.Engine, "before_cursor_execute", count)
        try:
            return real_publish(publication, instance, force)
        finally:
            sqlalchemy.event.remove(sqlalchemy.engine.Engine, "before_cursor_execute", count)

    with pytest.MonkeyPatch.context() as patch:
        for name, value in instance_env(home).items():
            patch.setenv(name, value)
        patch.setattr(publish_module, "publish", counted_publish)
        spec = BackfillSpec(
            module=CODE_LOCATION, selection="*", start="2024-01-01", end=f"2024-01-{days:02d}", max_parallel=4
        )
        with dg.DagsterInstance.get() as instance:
            graph = graph_of(spec, instance)
            record = BackfillRecord(spec, store=BackfillStore(instance))
            statuses = BackfillRun(instance, record, graph, set()).run()
            assert set(statuses.values()) == {NodeStatus.SUCCEEDED}
            tags = {BACKFILL_ID_TAG: record.id}
            node_runs = [run for run in instance.get_runs(dg.RunsFilter(tags=tags)) if PUBLISH_RUN_TAG not in run.tags]
            [publish_run] = instance.get_runs(dg.RunsFilter(tags={**tags, PUBLISH_RUN_TAG: "true"}))
            recorded = Counter(
                record.asset_key.to_user_string()
                for record in instance.get_records_for_run(
                    publish_run.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION
                ).records
            )
    return statements, len(node_runs), recorded


def test_a_publish_with_nothing_to_publish_reads_the_runs_outputs_in_a_few_queries(home_template, tmp_path):
    few, few_runs, few_recorded = _publish(3, home_template, tmp_path)
    many, many_runs, many_recorded = _publish(12, home_template, tmp_path)
    assert (few_runs, many_runs) == (3 * ASSETS, 12 * ASSETS)
    assert few_recorded == {"source": 3, "report": 3}
    assert many_recorded == {"source": 12, "report": 12}
    # A query per run would add one statement per extra run (18 here); reading them together adds none.
    assert many - few < (many_runs - few_runs) // 2, (few, many)
