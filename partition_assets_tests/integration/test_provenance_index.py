"""Issue 54, build point 1: the provenance index (dagster_instance/provenance_index.py) answers what a
full scan of the event log answers, reads only the events since its cursor, is built again
when missing or unreadable, and refuses an index of a newer format.

One git repository holds a code location stamped with its commit (with_git_versions): three
daily assets (`events` -> `daily` -> `summary`) and an unpartitioned `reference`. Its history,
on a real instance (SQLite; again on Postgres): commit 1 materializes everything for six days
in process (`dg.materialize`); Dagster's own command (`dagster asset materialize`) makes
`events` 2024-01-02 again; commit 2 changes `daily`'s code and the engine (`backfill run`, its
node runs in worker processes) makes `daily` 2024-01-03..04 again; then `events` 2024-01-05 and
`reference` again in process. The index is built after commit 1's runs and updated after the rest.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest
from dagster._cli.asset import asset_materialize_command
from sqlalchemy import delete, select, text, update

from partition_assets.backfill.commands import SilentConsole, plan_backfill, run_backfill
from partition_assets.backfill.model import Node
from partition_assets.backfill.planning.graph import build_graph
from partition_assets.backfill.planning.history import latest_materializations, scanned_materializations
from partition_assets.backfill.planning.instance_state import materialized_nodes
from partition_assets.backfill.planning.reasons import Made
from partition_assets.backfill.planning.spec import BackfillSpec
from partition_assets.cli.main import main as cli_main
from partition_assets.code_location import load_definitions
from partition_assets.dagster_instance import provenance_index
from partition_assets.dagster_instance.partition_wipe import wipe_partitions
from partition_assets.dagster_instance.provenance_index import (
    CURSOR,
    PROVENANCE,
    PROVENANCE_INDEX_FORMAT,
    latest_provenance,
    sql_event_log,
    update_index,
)
from partition_assets.deploy import git_sha
from partition_assets.errors import ProvenanceIndexVersionError
from partition_assets_tests.support.git_repo import git
from partition_assets_tests.support.instances import (
    ON_SQLITE,
    also_on_postgres,
    instance_env,
    open_instance,
    postgres_url_for,
)

LOCATION = '''
"""Three daily assets in a chain and an unpartitioned one."""
import dagster as dg

from partition_assets.deploy import with_git_versions

DAYS = dg.DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-01-07")


@dg.asset(partitions_def=DAYS)
def events() -> int:
    return 1


@dg.asset(partitions_def=DAYS)
def daily(events: int) -> int:
    return events + {formula}


@dg.asset(partitions_def=DAYS)
def summary(daily: int) -> int:
    return daily * 2


@dg.asset
def reference() -> int:
    return 7


defs = with_git_versions(dg.Definitions(assets=[events, daily, summary, reference]), __file__)
'''
DAYS = [f"2024-01-0{day}" for day in range(1, 7)]
ASSETS = [dg.AssetKey(name) for name in ("events", "daily", "summary", "reference")]
# Dagster runs the steps of a run in one process (as the engine's node runs do).
IN_PROCESS = json.dumps({"execution": {"config": {"in_process": {}}}})


@dataclass(frozen=True)
class History:
    location: Path
    env: dict[str, str]
    instance: dg.DagsterInstance
    commits: tuple[str, str]
    marks: tuple[int, ...]  # the event log's last event after each step of the history

    def scan(self, history_as_of: int | None = None):
        """Today's answer: every materialization of every asset read from the event log."""
        return scanned_materializations(self.instance, dict.fromkeys(ASSETS), history_as_of)

    def index(self, history_as_of: int | None = None, progress=None, made_by: frozenset[str] | None = None):
        spec = BackfillSpec(module=str(self.location), selection="*", stale=True, history_as_of=history_as_of)
        if progress is not None:
            latest_provenance(self.instance, ASSETS, progress, with_inputs=True)
        return {  # as the scan answers: the fields the rules read
            key: {partition: Made(m.storage_id, m.git_sha, m.code_version) for partition, m in by_partition.items()}
            for key, by_partition in latest_materializations(self.instance, ASSETS, spec, made_by).items()
        }


def _commit(repo: Path, formula: int) -> str:
    (repo / "location.py").write_text(LOCATION.replace("{formula}", str(formula)))
    git(repo, "add", "location.py")
    git(repo, "commit", "-qm", f"daily: events + {formula}")
    git_sha.cache_clear()  # the commit is read once per process; here it changes under it
    return git(repo, "rev-parse", "HEAD")


def _materialize(location: Path, instance: dg.DagsterInstance, selection: str, days: list[str | None]) -> None:
    assets = load_definitions(str(location)).assets or []
    for day in days:
        assert dg.materialize(assets, selection=selection, partition_key=day, instance=instance).success


@pytest.fixture(scope="module", params=ON_SQLITE)
def history(request, home_template, tmp_path_factory) -> Iterator[History]:
    root = tmp_path_factory.mktemp("provenance")
    repo, home = root / "repo", root / "dagster_home"
    postgres_url = postgres_url_for(request)
    if postgres_url is None:
        shutil.copytree(home_template, home)
    env = instance_env(home, postgres_url)
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    location = repo / "location.py"
    with open_instance(env) as instance:
        first = _commit(repo, 1)
        _materialize(location, instance, "key:events or key:daily or key:summary", list(DAYS))
        _materialize(location, instance, "key:reference", [None])
        marks = [instance.event_log_storage.get_maximum_record_id() or 0]
        update_index(instance, progress=lambda line: None)  # built here, updated by what follows
        asset_materialize_command.main(
            ["-f", str(location), "--select", "events", "--partition", DAYS[1], "--config-json", IN_PROCESS],
            standalone_mode=False,
        )
        marks.append(instance.event_log_storage.get_maximum_record_id() or 0)
        second = _commit(repo, 2)
        engine = BackfillSpec(module=str(location), selection="daily", start=DAYS[2], end=DAYS[3])
        assert run_backfill(engine, instance, SilentConsole()).succeeded
        marks.append(instance.event_log_storage.get_maximum_record_id() or 0)
        _materialize(location, instance, "key:events", [DAYS[4]])
        _materialize(location, instance, "key:reference", [None])
        marks.append(instance.event_log_storage.get_maximum_record_id() or 0)
        git_sha.cache_clear()
        yield History(location, env, instance, (first, second), tuple(marks))


def _dialect(instance: dg.DagsterInstance) -> str:
    with sql_event_log(instance).index_connection() as connection:
        return connection.dialect.name


def _execute(instance: dg.DagsterInstance, statement) -> None:
    with sql_event_log(instance).index_transaction() as connection:
        connection.execute(statement)


@also_on_postgres("history")
def test_the_index_answers_what_a_full_scan_of_the_event_log_answers(history):
    first, second = history.commits
    index = history.index()
    assert index == history.scan()
    # The history is what the module says: both commits, both code versions of daily, every writer.
    assert {made.git_sha for made in index[dg.AssetKey("daily")].values()} == {first, second}
    daily_versions = {p: made.code_version for p, made in index[dg.AssetKey("daily")].items()}
    assert daily_versions[DAYS[2]] == daily_versions[DAYS[3]] != daily_versions[DAYS[0]]
    assert set(index[dg.AssetKey("reference")]) == {""} and set(index[dg.AssetKey("summary")]) == set(DAYS)
    # As of each step of the history: the partitions made again since are read as of then.
    for mark in history.marks:
        assert history.index(history_as_of=mark) == history.scan(history_as_of=mark), mark
    # Asked for one commit's rows (what --produced-by alone reads), now and as of each step.
    for mark in (None, *history.marks):
        chosen, scanned = history.index(mark, made_by=frozenset({second})), history.scan(mark)
        assert _made_by(chosen, second) == _made_by(scanned, second), mark


def _made_by(found: dict, commit: str) -> dict:
    return {key: {p: made for p, made in by.items() if made.git_sha == commit} for key, by in found.items()}


@also_on_postgres("history")
def test_each_row_keeps_its_event_s_data_version_and_the_upstream_data_versions_it_read(history):
    provenance = latest_provenance(history.instance, ASSETS, with_inputs=True)
    ids = [made.storage_id for by_partition in provenance.values() for made in by_partition.values()]
    events = {
        record.storage_id: record
        for record in history.instance.get_event_records(
            dg.EventRecordsFilter(dg.DagsterEventType.ASSET_MATERIALIZATION, storage_ids=ids)
        )
    }
    read_events = 0
    for key, by_partition in provenance.items():
        for partition, made in by_partition.items():
            record = events[made.storage_id]
            materialization = record.asset_materialization
            assert materialization is not None and materialization.asset_key == key
            assert (materialization.partition or "") == partition and made.run_id == record.run_id
            tags = materialization.tags or {}
            assert made.data_version == tags.get("dagster/data_version") and made.timestamp == record.timestamp, (
                key,
                partition,
                tags,
            )
            upstream = {"daily": "events", "summary": "daily"}.get(key.path[0])
            read = tags.get(f"dagster/input_data_version/{upstream}")
            assert made.input_data_versions == ({upstream: read} if read else {}), (key, partition)
            read_events += read is not None
    # Every partition of daily and summary: those the engine backfilled (daily 2024-01-03 and 04)
    # too, since an asset on Dagster's IO manager records itself in its node run, as Dagster's
    # runs do, with the data versions it read. (A staged table's materializations, which the
    # engine's publish records, carry none.)
    assert read_events == 2 * len(DAYS)


@also_on_postgres("history")
def test_an_update_reads_only_the_events_since_its_cursor(history, monkeypatch):
    storage = sql_event_log(history.instance)
    returned: list[int] = []
    reads = storage.get_event_records

    def counted(*args, **kwargs):
        records = reads(*args, **kwargs)
        returned.append(len(records))
        return records

    monkeypatch.setattr(storage, "get_event_records", counted)
    update_index(history.instance)
    before = sum(returned)
    _materialize(history.location, history.instance, "key:events", [DAYS[0], DAYS[5]])
    git_sha.cache_clear()
    lines: list[str] = []
    assert update_index(history.instance, lines.append) == 2
    assert sum(returned) - before == 2  # what Dagster handed the index: the two new events alone
    assert update_index(history.instance, lines.append) == 0 and sum(returned) - before == 2
    assert lines == []  # an update, not a build
    assert history.index() == history.scan()


CORRUPTIONS = {
    "row unreadable": update(PROVENANCE).where(PROVENANCE.c.partition == DAYS[0]).values(input_data_versions="{oops"),
    "cursor gone": delete(CURSOR),
    "cursor beyond the event log": update(CURSOR).values(storage_id=10**9),
    "cursor not a number": update(CURSOR).values(storage_id="seven"),
    "tables gone": text(f"DROP TABLE {PROVENANCE.name}"),
}


@also_on_postgres("history")
@pytest.mark.parametrize("corruption", CORRUPTIONS.values(), ids=CORRUPTIONS.keys())
def test_a_missing_or_unreadable_index_is_built_again_from_the_event_log_with_a_progress_line(history, corruption):
    update_index(history.instance)
    if corruption is CORRUPTIONS["cursor not a number"] and _dialect(history.instance) == "postgresql":
        pytest.skip("Postgres refuses text in a bigint column")
    _execute(history.instance, corruption)
    lines: list[str] = []
    assert history.index(progress=lines.append) == history.scan()
    assert any("building it" in line and "from the event log" in line for line in lines), lines
    assert any("materializations read" in line for line in lines), lines


@also_on_postgres("history")
def test_an_index_of_a_newer_format_is_refused_naming_its_version_then_rebuilt_on_demand(history, capsys):
    update_index(history.instance)
    _execute(history.instance, update(CURSOR).values(format_version=PROVENANCE_INDEX_FORMAT + 1))
    with sql_event_log(history.instance).index_connection() as connection:
        rows_before = connection.execute(
            select(PROVENANCE).order_by(PROVENANCE.c.asset_key, PROVENANCE.c.partition)
        ).all()
    spec = BackfillSpec(module=str(history.location), selection="*", stale=True)
    with pytest.raises(ProvenanceIndexVersionError) as refused:
        plan_backfill(spec, history.instance)
    message = str(refused.value)
    assert f"is in format {PROVENANCE_INDEX_FORMAT + 1}, which this release" in message
    assert "provenance_index rebuild" in message and "Nothing was written" in message
    with sql_event_log(history.instance).index_connection() as connection:
        assert (
            connection.execute(select(PROVENANCE).order_by(PROVENANCE.c.asset_key, PROVENANCE.c.partition)).all()
            == rows_before
        )
    # The command line refuses it in one line, exit 2; the rebuild command builds it for this release.
    assert cli_main(["backfill", "plan", "-f", str(history.location), "--select", "*", "--stale"]) == 2
    assert f"in format {PROVENANCE_INDEX_FORMAT + 1}" in capsys.readouterr().err
    with open_instance(history.env):
        assert provenance_index.main(["rebuild"]) == 0
    assert "built from" in capsys.readouterr().out
    assert history.index() == history.scan()


@also_on_postgres("home")
def test_a_wiped_partition_leaves_the_index_and_a_rebuild_does_not_bring_it_back(home):
    """What `--catch-up` reads (materialized_nodes): a partition wiped (a rollback of a publish)
    is missing, as Dagster's own partition index says."""
    with dg.DagsterInstance.get() as instance:
        _three_days_indexed(instance)
        assert wipe_partitions(instance, _made.key, ["2024-01-02"])
        keys = _DAYS.get_partition_keys()
        graph = build_graph(
            dg.Definitions(assets=[_made]).resolve_asset_graph(), [_made.key], picked_keys={_made.key: keys}
        )
        expected = {Node(_made.key, day) for day in instance.get_materialized_partitions(_made.key)}
        kept = {Node(_made.key, day) for day in ("2024-01-01", "2024-01-03")}
        assert materialized_nodes(graph, instance) == expected == kept
        provenance_index.rebuild_index(instance, progress=lambda line: None)
        assert materialized_nodes(graph, instance) == expected


@also_on_postgres("history")
def test_two_processes_building_the_index_at_once_leave_what_a_full_scan_answers(history):
    for table in (PROVENANCE, CURSOR):
        _execute(history.instance, text(f"DROP TABLE {table.name}"))
    update = (
        "import dagster as dg\n"
        "from partition_assets.dagster_instance.provenance_index import update_index\n"
        "with dg.DagsterInstance.get() as instance:\n"
        "    update_index(instance)\n"
    )
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", update], env={**os.environ, **history.env}, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    for process in processes:
        _, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
    assert history.index() == history.scan()


def test_as_of_an_earlier_event_more_partitions_made_again_than_a_query_names_are_read_as_of_then(
    tmp_path, home_template
):
    """A resumed backfill judges history as of its start: here 600 partitions were made again
    since (more than one query names: the asset's whole history is read, then filtered)."""
    home = tmp_path / "dagster_home"
    shutil.copytree(home_template, home)
    key = dg.AssetKey("wide")
    partitions = [f"p{n:03}" for n in range(600)]

    def report(version: str) -> None:
        @dg.op(name=f"report_{version}")
        def made():
            for partition in partitions:
                yield dg.AssetMaterialization(key, partition=partition, tags={"dagster/code_version": version})
            yield dg.Output(None)

        assert (
            dg.GraphDefinition(name=f"reporting_{version}", node_defs=[made])
            .to_job()
            .execute_in_process(instance=instance)
            .success
        )

    with dg.DagsterInstance.from_config(str(home)) as instance:
        report("1")
        first = instance.event_log_storage.get_maximum_record_id()
        report("2")
        spec = BackfillSpec(module=__file__, selection="*", stale=True, history_as_of=first)
        then = latest_materializations(instance, [key], spec)[key]
        assert then == scanned_materializations(instance, {key: None}, first)[key]
        assert {made.code_version for made in then.values()} == {"1"} and set(then) == set(partitions)


@also_on_postgres("home")
def test_an_instance_wiped_whole_then_materialized_again_is_indexed_anew(home):
    """`dagster instance wipe` deletes every event; on Postgres storage ids then go on from where
    they were (a sequence), on SQLite they start again: either way the index, whose last event
    read is gone, is built again from what the event log holds."""
    with dg.DagsterInstance.get() as instance:
        _three_days_indexed(instance)
        instance.wipe()
        assert dg.materialize([_made], partition_key="2024-01-02", instance=instance).success
        lines: list[str] = []
        assert set(latest_provenance(instance, [_made.key], lines.append)[_made.key]) == {"2024-01-02"}
        assert instance.get_materialized_partitions(_made.key) == {"2024-01-02"}
        assert any("no longer in the event log" in line for line in lines), lines


_DAYS = dg.DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-01-04")


@dg.asset(partitions_def=_DAYS, key="made")
def _made() -> int:
    return 1


def _three_days_indexed(instance: dg.DagsterInstance) -> None:
    """`made` materialized for each of its three days in `instance`, then the index updated."""
    for day in _DAYS.get_partition_keys():
        assert dg.materialize([_made], partition_key=day, instance=instance).success
    update_index(instance)
