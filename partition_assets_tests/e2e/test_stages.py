"""The publishing stages (backfill/publishing/stages.py) end to end through `partition-assets
backfill` on real Spark, Delta tables and a Dagster instance: a coordinator killed (SIGKILL)
at the start of any stage has its record say which stage it finished last, and `resume` goes
on from the stage it was killed in, leaving exactly what an undisturbed publish of the same
backfill leaves (the tables, the ledger's rows, the release log's records, Dagster's publish
run and materializations, one `published` notification), no stage done twice."""

import signal
from dataclasses import dataclass

import dagster as dg
import pytest

from partition_assets.backfill.model import BackfillStatus
from partition_assets.backfill.publishing.dagster_events import PUBLISH_RUN_TAG
from partition_assets.backfill.publishing.stages import PUBLISH_STAGES
from partition_assets.backfill.state.ledger import Ledger, ledger_uri
from partition_assets.run_tags import BACKFILL_ID_TAG
from partition_assets.storage.failpoints import ENV as FAILPOINT_ENV
from partition_assets.storage.release_log import read_log
from partition_assets_tests.support.cli_runs import backfill_id, ok
from partition_assets_tests.support.lakehouse import TABLES, Lakehouse
from partition_assets_tests.support.locations import safe_defs
from partition_assets_tests.support.records import recorded_backfill

pytestmark = pytest.mark.slow

DAY = ("2024-01-01", "2024-01-01")  # one day of the three tables: three nodes
NEW_CONTENT = {safe_defs.FACTOR_ENV: "1.25"}
STAGES = [stage.name for stage in PUBLISH_STAGES]


@dataclass(frozen=True)
class Published:
    """What a publish of a backfill left, without what differs between two runs of it (ids, times)."""

    contents: dict
    versions: dict[str, int]
    ledger: list[tuple]  # every row the backfill appended
    releases: list[tuple]  # every release log record of the backfill
    publish_runs: int
    materialized: list[tuple[str, str | None]]  # (asset, partition) per materialization of its publish run
    published_notifications: int


def published_by(house: Lakehouse, bid: str) -> Published:
    ledger = Ledger(ledger_uri(str(house.lake))).entries(bid)
    log = read_log(str(house.lake)).rows
    with house.instance() as instance:
        runs = instance.get_runs(dg.RunsFilter(tags={BACKFILL_ID_TAG: bid, PUBLISH_RUN_TAG: "true"}))
        materialized = sorted(
            (materialization.asset_key.to_user_string(), materialization.partition)
            for run in runs
            for entry in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION)
            if (materialization := entry.asset_materialization) is not None
        )
    return Published(
        contents=house.contents(),
        versions=house.versions(),
        ledger=sorted(
            (row.asset, row.partition, row.status, row.rows, row.checksum, row.published_version, str(row.gate))
            for row in ledger
        ),
        releases=sorted(
            (row["sequence"] or 0, row["kind"], row["operation"], row["table"] or "", row["version"])
            for row in log
            if row["backfill_id"] == bid
        ),
        publish_runs=len(runs),
        materialized=materialized,
        published_notifications=house.events().count("published"),
    )


@pytest.fixture(scope="module")
def undisturbed(two_days_published, tmp_path_factory) -> Published:
    """What an undisturbed backfill of DAY leaves, on a copy of January 1-2 published."""
    house = two_days_published.copy_to(tmp_path_factory.mktemp("undisturbed"))
    return published_by(house, backfill_id(ok(house.backfill(*DAY, **NEW_CONTENT))))


@pytest.mark.parametrize("stage", STAGES)
def test_a_publish_killed_in_any_stage_resumes_there_and_leaves_what_an_undisturbed_one_leaves(
    published_2_days, undisturbed, stage
):
    house = published_2_days
    versions = house.versions()

    killed = house.backfill(*DAY, **NEW_CONTENT, **{FAILPOINT_ENV: f"stage_{stage}"})

    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    bid = house.newest_backfill()
    before = STAGES[STAGES.index(stage) - 1] if STAGES.index(stage) else None
    assert recorded_backfill(house.home, bid).publish_stage == before  # where it is: the stage it finished last

    ok(house.cli("resume", bid, **NEW_CONTENT))

    record = recorded_backfill(house.home, bid)
    assert record.status == BackfillStatus.PUBLISHED and record.publish_stage == STAGES[-1]
    assert published_by(house, bid) == undisturbed
    assert house.versions() == {table: version + 1 for table, version in versions.items()}  # one commit per table
    assert set(versions) == set(TABLES)
