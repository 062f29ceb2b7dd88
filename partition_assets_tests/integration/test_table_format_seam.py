"""The TableFormat seam holds (issue 53): a format that is not Delta, picked the way a user
picks one (its IO manager names it: support/snapshot_format.py), goes through a staged
backfill's publish and rollback end to end, recorded in the release log and read back through
it; vacuum finds its tables through the registry (storage/maintenance.py); and an operation its format lacks the
capability for is refused naming the format, the capability and the fix.

The backfills of support/locations/snapshot_defs.py run through the real coordinator, workers, Spark
and instance (as test_publication_cost.py's); rollback and vacuum through their commands."""

import importlib
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest

from partition_assets.backfill.commands import rollback_backfill
from partition_assets.backfill.dagster_ui.view import WEBSERVER
from partition_assets.backfill.model import BackfillStatus, NodeStatus
from partition_assets.backfill.planning.instance_state import graph_of
from partition_assets.backfill.planning.spec import BackfillSpec
from partition_assets.backfill.running.coordinator import BackfillRun
from partition_assets.backfill.state.record import BackfillRecord
from partition_assets.backfill.state.store import BackfillStore
from partition_assets.errors import UnsupportedByFormatError
from partition_assets.partitions import daily
from partition_assets.storage import PartitionScope, read_tables, vacuum
from partition_assets.storage.release_reads import releases
from partition_assets.storage.table_formats import format_at
from partition_assets_tests.support.instances import instance_env
from partition_assets_tests.support.retention import backdate
from partition_assets_tests.support.snapshot_format import PUBLISH, ROLLBACK, WRITE, SnapshotFormat, snapshots

CODE_LOCATION = "partition_assets_tests.support.locations.snapshot_defs"  # imported once its lake is in the environment
LAKE_ENV = "PARTITION_ASSETS_TEST_LAKE"
TAG_FILE = "tag"  # snapshot_defs.TAG_FILE, in the instance's folder
FIRST_DAY, LAST_DAY, DAYS = "2024-01-01", "2024-01-03", 3
TABLES = ("readings", "tagged_days")


@dataclass(frozen=True)
class Lake:
    home: Path
    root: Path

    def tags(self, table: str, version: int | None = None) -> dict[str, str]:
        """Each day's tag in `table`, read through its format (without Spark) at `version` (None: latest)."""
        uri = str(self.root / table)
        fmt = SnapshotFormat()
        rows = fmt.read_version(uri, fmt.version(uri) if version is None else version).to_pylist()
        return {row["ds"]: row["tag"] for row in rows}

    def backfill(self, tag: str, **fields) -> tuple[str, set[NodeStatus]]:
        """A staged backfill of both assets over the days, their rows tagged `tag`; its id and its nodes' statuses."""
        (self.home / TAG_FILE).write_text(tag)
        spec = BackfillSpec(
            module=CODE_LOCATION, selection="*", start=FIRST_DAY, end=LAST_DAY, max_parallel=1, **fields
        )
        with dg.DagsterInstance.get() as instance:
            record = BackfillRecord(spec, store=BackfillStore(instance))
            run = BackfillRun(instance, record, graph_of(spec, instance), set(), dagster_view=WEBSERVER)
            return record.id, set(run.run().values())


@pytest.fixture
def lake(spark_resource, home_template, tmp_path) -> Iterator[Lake]:
    home, root = tmp_path / "dagster_home", tmp_path / "lake"
    shutil.copytree(home_template, home)
    with pytest.MonkeyPatch.context() as patch:
        for name, value in {**instance_env(home), LAKE_ENV: str(root)}.items():
            patch.setenv(name, value)
        importlib.reload(importlib.import_module(CODE_LOCATION))  # its IO manager's root: this lake
        yield Lake(home, root)


def test_a_staged_backfill_of_a_format_that_is_not_delta_publishes_and_rolls_back(lake):
    first, statuses = lake.backfill("first")
    assert statuses == {NodeStatus.SUCCEEDED}
    second, statuses = lake.backfill("second")
    assert statuses == {NodeStatus.SUCCEEDED}
    days = {f"2024-01-0{day}": "second" for day in range(1, DAYS + 1)}
    # Each publish is one snapshot per table; the downstream asset read the upstream staged by its backfill.
    for table in TABLES:
        uri = str(lake.root / table)
        assert [(s.action, s.backfill_id) for s in snapshots(uri)] == [(PUBLISH, first), (PUBLISH, second)]
        assert lake.tags(table) == days
        assert format_at(uri).name == "snapshots"
    # The release log recorded each publish at the tables' versions, read back through the format.
    assert [(r.backfill_id, r.operation, dict(r.versions)) for r in releases(str(lake.root))] == [
        (first, "publish", dict.fromkeys(TABLES, 0)),
        (second, "publish", dict.fromkeys(TABLES, 1)),
    ]
    assert {row["tag"] for row in read_tables(str(lake.root), ["readings"])["readings"].to_pylist()} == {"second"}

    with dg.DagsterInstance.get() as instance:
        rollback_backfill(instance, second)
        assert BackfillStore(instance).status(second) == BackfillStatus.ROLLED_BACK

    for table in TABLES:
        uri = str(lake.root / table)
        assert [(s.action, s.backfill_id) for s in snapshots(uri)][-1] == (ROLLBACK, second)
        assert lake.tags(table) == {day: "first" for day in days} == lake.tags(table, version=0)
    assert [(r.backfill_id, r.operation) for r in releases(str(lake.root))][-1] == (second, "rollback")
    assert {row["tag"] for row in read_tables(str(lake.root), ["readings"])["readings"].to_pylist()} == {"first"}
    # A production run writes through the format, and its downstream input is read at the release.
    (lake.home / TAG_FILE).write_text("production")
    code_location = importlib.import_module(CODE_LOCATION)
    with dg.DagsterInstance.get() as instance:
        assets = [code_location.readings, code_location.tagged_days]
        ran = dg.materialize(
            assets, partition_key="2024-01-02", instance=instance, resources=code_location.defs.resources
        )
        assert ran.success
    for table in TABLES:
        assert snapshots(str(lake.root / table))[-1].action == WRITE
        assert lake.tags(table) == {**{day: "first" for day in days}, "2024-01-02": "production"}
    # Maintenance finds the table's format through the registry: nothing unreferenced to delete.
    result = vacuum(str(lake.root / "readings"), retention_hours=1)
    assert result.data_files == [] and result.staging_folders == []


def test_a_capability_the_format_lacks_is_refused_before_anything_is_written(lake):
    """The snapshot format keeps no previous versions: a staged backfill asking for them
    (--keep-previous) is refused before it launches anything, naming the format, the
    capability and the fix."""
    with pytest.raises(UnsupportedByFormatError) as refused:
        lake.backfill("kept", keep_previous="1d")
    message = str(refused.value)
    assert "stored as snapshots" in message and "'keep_previous'" in message, message
    assert "run the backfill without --keep-previous" in message and "Nothing was written" in message, message
    assert not any((lake.root / table).exists() for table in TABLES)


def test_vacuum_reaches_a_registered_formats_table_through_the_registry(spark, tmp_path):
    """`vacuum` (storage/maintenance.py) asks the registry which format holds the table: the
    snapshot format, registered by its IO manager's class, deletes the file no snapshot names
    (a write killed before its commit) and keeps the one its snapshot names."""
    uri = str(tmp_path / "t")
    day = PartitionScope.for_keys(daily("2024-01-01"), ["2024-01-01"], ("ds",))
    SnapshotFormat().write(spark.createDataFrame([("2024-01-01", "a")], "ds string, tag string"), uri, day)
    [named] = (tmp_path / "t" / "ds=2024-01-01").glob("*.parquet")
    orphan = named.with_name("orphan.parquet")
    shutil.copy(named, orphan)
    backdate(tmp_path / "t", hours=2)

    result = vacuum(uri, retention_hours=1)

    assert result.data_files == [str(orphan)] and named.exists() and not orphan.exists()
