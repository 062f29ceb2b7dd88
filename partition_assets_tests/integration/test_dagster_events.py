"""A staged backfill with nothing to publish (no asset stored by this library) still records
its nodes' materializations in one publish run, in a few instance round trips however many
runs it ran: the runs' outputs are read in a few queries, not one per run; and on Dagster's
default SQLite event log (a database per run), it reads them run by run and keeps the
metadata each body gave.

Each backfill runs through the real coordinator, workers and instance; the SQL statements
of its publish are counted as they happen (every engine's, the coordinator's other threads
included: the count is compared across sizes, not pinned)."""

import shutil
from collections import Counter

import dagster as dg
import pytest

from partition_assets.backfill.dagster_ui.view import WEBSERVER
from partition_assets.backfill.model import NodeStatus
from partition_assets.backfill.planning.instance_state import graph_of
from partition_assets.backfill.planning.spec import BackfillSpec
from partition_assets.backfill.publishing import stages
from partition_assets.backfill.publishing.dagster_events import PUBLISH_RUN_TAG
from partition_assets.backfill.running.coordinator import BackfillRun
from partition_assets.backfill.state.record import BackfillRecord
from partition_assets.backfill.state.store import BackfillStore
from partition_assets.run_tags import BACKFILL_ID_TAG
from partition_assets_tests.support.instances import instance_env
from partition_assets_tests.support.publish_stages import watched_stages

CODE_LOCATION = "partition_assets_tests.support.locations.no_table_defs"
ASSETS = 2


# Dagster's instance defaults: its run-sharded SQLite event log, not the repo's consolidated one.
DAGSTER_DEFAULT_INSTANCE_YAML = "telemetry:\n  enabled: false\n"


def _publish(days: int, home_template, tmp_path, dagster_yaml: str | None = None) -> tuple[int, int, Counter, dict]:
    """Runs a staged backfill of every asset over `days` days (a run per node) on a fresh
    instance (the repo's dagster.yaml, or `dagster_yaml`): (SQL statements of its publish,
    node runs, materializations the publish run recorded, `report`'s metadata per day there)."""
    home = tmp_path / f"home_{days}"
    shutil.copytree(home_template, home)
    statements = 0

    def count(*_: object) -> None:
        nonlocal statements
        statements += 1

    with pytest.MonkeyPatch.context() as patch:
        for name, value in instance_env(home).items():
            patch.setenv(name, value)
        if dagster_yaml is not None:
            (home / "dagster.yaml").write_text(dagster_yaml)
        patch.setattr(stages, "PUBLISH_STAGES", watched_stages(count))
        spec = BackfillSpec(
            module=CODE_LOCATION, selection="*", start="2024-01-01", end=f"2024-01-{days:02d}", max_parallel=4
        )
        with dg.DagsterInstance.get() as instance:
            graph = graph_of(spec, instance)
            record = BackfillRecord(spec, store=BackfillStore(instance))
            statuses = BackfillRun(instance, record, graph, set(), dagster_view=WEBSERVER).run()
            assert set(statuses.values()) == {NodeStatus.SUCCEEDED}
            tags = {BACKFILL_ID_TAG: record.id}
            node_runs = [run for run in instance.get_runs(dg.RunsFilter(tags=tags)) if PUBLISH_RUN_TAG not in run.tags]
            [publish_run] = instance.get_runs(dg.RunsFilter(tags={**tags, PUBLISH_RUN_TAG: "true"}))
            materializations = [
                record.asset_materialization
                for record in instance.get_records_for_run(
                    publish_run.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION
                ).records
            ]
    recorded = Counter(m.asset_key.to_user_string() for m in materializations)
    reported = {
        m.partition: m.metadata["reported_day"].value for m in materializations if m.asset_key.path == ["report"]
    }
    return statements, len(node_runs), recorded, reported


def test_a_publish_with_nothing_to_publish_reads_the_runs_outputs_in_a_few_queries(home_template, tmp_path):
    few, few_runs, few_recorded, _ = _publish(3, home_template, tmp_path)
    many, many_runs, many_recorded, _ = _publish(12, home_template, tmp_path)
    assert (few_runs, many_runs) == (3 * ASSETS, 12 * ASSETS)
    assert few_recorded == {"source": 3, "report": 3}
    assert many_recorded == {"source": 12, "report": 12}
    # A query per run would add one statement per extra run (18 here); reading them together adds none.
    assert many - few < (many_runs - few_runs) // 2, (few, many)


def test_on_dagster_s_run_sharded_event_log_the_publish_keeps_each_body_s_metadata(home_template, tmp_path):
    _, runs, recorded, reported = _publish(3, home_template, tmp_path, DAGSTER_DEFAULT_INSTANCE_YAML)
    with dg.DagsterInstance.from_config(str(tmp_path / "home_3")) as instance:
        assert instance.event_log_storage.is_run_sharded  # the storage this test is about
    assert runs == 3 * ASSETS and recorded == {"source": 3, "report": 3}
    assert reported == {day: day for day in ("2024-01-01", "2024-01-02", "2024-01-03")}
