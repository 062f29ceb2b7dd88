"""A staged backfill's publish costs per table, asset and run, not per node; and the
materializations it records keep the metadata each node's body gave its output.

One backfill of partition_assets_tests/support/locations/publish_defs.py (a Delta table and an asset returning
`MaterializeResult`, one range run each) runs through the real coordinator, workers, Spark
and instance; what its publish does is counted as it happens: SQL statements on the
instance, the event-log inserts of materializations, Delta commits of the table and of
the ledger."""

import importlib
import shutil
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg
import pytest
from deltalake import DeltaTable

from partition_assets.backfill.dagster_ui.view import WEBSERVER
from partition_assets.backfill.model import NodeStatus
from partition_assets.backfill.planning.instance_state import graph_of
from partition_assets.backfill.planning.spec import BackfillSpec
from partition_assets.backfill.publishing import stages
from partition_assets.backfill.publishing.dagster_events import PUBLISH_RUN_TAG
from partition_assets.backfill.running.coordinator import BackfillRun
from partition_assets.backfill.state.ledger import ledger_uri
from partition_assets.backfill.state.record import BackfillRecord
from partition_assets.backfill.state.store import BackfillStore
from partition_assets.run_tags import BACKFILL_ID_TAG
from partition_assets.storage import backfill_staging
from partition_assets_tests.support.counting_filesystem import counting_table_filesystem
from partition_assets_tests.support.instances import instance_env
from partition_assets_tests.support.publish_stages import watched_stages

CODE_LOCATION = "partition_assets_tests.support.locations.publish_defs"  # imported once its lake is in the environment
LAKE_ENV = "PARTITION_ASSETS_TEST_LAKE"
FIRST_DAY, LAST_DAY, DAYS = "2024-01-01", "2024-03-30", 90
ASSETS = ("stored", "reported")
MATERIALIZATION = dg.DagsterEventType.ASSET_MATERIALIZATION.value


@dataclass
class PublishCost:
    """What one publish did, counted while it ran."""

    statements: int = 0  # SQL statements on the instance's storages
    materialization_inserts: list[Counter] = field(default_factory=list)  # per event-log insert: rows per asset
    ledger_commits: int = 0
    table_versions: list[int] = field(default_factory=list)  # the Delta table's, after the publish
    staging_listings: Counter = field(default_factory=Counter)  # folder listings of the staging, by folder


@dataclass
class Published:
    backfill_id: str
    home: Path
    cost: PublishCost
    statuses: Counter
    rows_per_day: int


def _count_statements(cost: PublishCost):
    """A SQLAlchemy listener counting every statement, and the materializations of each
    insert into the event log by the asset their rows name."""

    def listen(conn, cursor, statement, parameters, context, executemany) -> None:
        cost.statements += 1
        if statement.lstrip().upper().startswith("INSERT INTO EVENT_LOGS"):
            # an executemany's parameters are one sequence per row
            rows = [[str(value) for value in row] for row in (parameters if executemany else [parameters or ()])]
            materialized = Counter(
                asset for row in rows if MATERIALIZATION in row for asset in ASSETS if f'["{asset}"]' in row
            )
            if materialized:
                cost.materialization_inserts.append(materialized)

    return listen


@pytest.fixture(scope="module")
def published(spark_resource, home_template, tmp_path_factory) -> Iterator[Published]:
    root = tmp_path_factory.mktemp("publish_cost")
    home, lake = root / "dagster_home", root / "lake"
    shutil.copytree(home_template, home)
    cost = PublishCost()
    with pytest.MonkeyPatch.context() as patch:
        for name, value in {**instance_env(home), LAKE_ENV: str(lake)}.items():
            patch.setenv(name, value)
        code_location = importlib.import_module(CODE_LOCATION)
        ledger_before: list[int] = []
        listed: Counter[str] = Counter()
        patch.setattr(backfill_staging, "table_filesystem", counting_table_filesystem(listed))

        def started() -> None:
            ledger_before.append(DeltaTable(ledger_uri(str(lake))).version())
            listed.clear()  # the gate's reads are not the publish's

        def ended() -> None:
            cost.ledger_commits = DeltaTable(ledger_uri(str(lake))).version() - ledger_before[0]
            cost.table_versions = [entry["version"] for entry in DeltaTable(str(lake / "stored")).history()]
            cost.staging_listings = Counter(listed)

        patch.setattr(stages, "PUBLISH_STAGES", watched_stages(_count_statements(cost), started, ended))
        # One slot: each asset's days share one run (more slots split them to fill the slots).
        spec = BackfillSpec(module=CODE_LOCATION, selection="*", start=FIRST_DAY, end=LAST_DAY, max_parallel=1)
        with dg.DagsterInstance.get() as instance:
            graph = graph_of(spec, instance)
            record = BackfillRecord(spec, store=BackfillStore(instance))
            statuses = Counter(BackfillRun(instance, record, graph, set(), dagster_view=WEBSERVER).run().values())
        yield Published(record.id, home, cost, statuses, code_location.ROWS_PER_DAY)


def test_publish_costs_writes_per_table_asset_and_run_not_per_node(published):
    nodes = DAYS * len(ASSETS)
    assert published.statuses == {NodeStatus.SUCCEEDED: nodes}
    cost = published.cost
    # Readers see one commit of the table (it created it); the ledger gains one commit.
    assert cost.table_versions == [0]
    assert cost.ledger_commits == 1
    # Every asset's 90 materializations are written in one insert (a batch), not one each.
    assert cost.materialization_inserts == [Counter(dict.fromkeys(ASSETS, DAYS))]
    # Every instance round trip of the publish: a few per table, asset and run (here 2 runs),
    # fewer than the days of one asset (a write per node would be 180 alone).
    assert cost.statements < DAYS, f"{cost.statements} SQL statements to publish {nodes} nodes"


def test_the_publish_reads_the_table_s_staging_once(published):
    # Its checks (the gate's fingerprint, commits outside the backfill), its commit and its file
    # moves take one read: the manifests listed once, the staged files once (it was 4 and 1).
    staging = f"stored/_backfills/{published.backfill_id}/"
    listings = {folder.split(staging, 1)[-1]: count for folder, count in published.cost.staging_listings.items()}
    assert listings == {"manifest": 1, "data": 1}


def test_the_publish_keeps_each_bodys_materialization_metadata(published):
    with dg.DagsterInstance.from_config(str(published.home)) as instance:
        runs = instance.get_runs(dg.RunsFilter(tags={BACKFILL_ID_TAG: published.backfill_id, PUBLISH_RUN_TAG: "true"}))
        [publish_run] = runs
        by_asset = {
            asset: [
                record.asset_materialization
                for record in instance.fetch_materializations(dg.AssetKey(asset), limit=100).records
                if record.run_id == publish_run.run_id
            ]
            for asset in ASSETS
        }
    assert {asset: len(materializations) for asset, materializations in by_asset.items()} == dict.fromkeys(ASSETS, DAYS)
    # A range run's output metadata holds for each of its days, as in Dagster's own records.
    days_by_run = Counter(m.metadata["staged_by_run"].value for m in by_asset["stored"])
    for materialization in by_asset["stored"]:  # stored by this library: its Output's metadata
        run = materialization.metadata["staged_by_run"].value
        assert materialization.metadata["body_days"] == dg.MetadataValue.int(days_by_run[run])
        assert materialization.metadata["rows"] == dg.MetadataValue.int(published.rows_per_day)
    for materialization in by_asset["reported"]:  # MaterializeResult, no IO manager
        first_day = materialization.metadata["body_first_day"].value
        assert FIRST_DAY <= first_day <= str(materialization.partition)
        assert materialization.metadata["backfill_id"] == dg.MetadataValue.text(published.backfill_id)
