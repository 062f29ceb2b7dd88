"""The publishing stages (backfill/publishing/stages.py) end to end through `partition-assets
backfill` on real Spark, Delta tables and a Dagster instance: a coordinator killed (SIGKILL)
at the start of any stage has its record say which stage it finished last, and `resume` goes
on from the stage it was killed in, leaving exactly what an undisturbed publish of the same
backfill leaves (the tables, the ledger's rows, the release log's records, Dagster's publish
run and materializations, one `published` notification), no stage done twice."""

import signal

import pytest

from partition_assets.backfill.model import BackfillStatus
from partition_assets.backfill.publishing.stages import PUBLISH_STAGES
from partition_assets.storage.failpoints import ENV as FAILPOINT_ENV
from partition_assets_tests.support.cli_runs import backfill_id, ok
from partition_assets_tests.support.lakehouse import TABLES
from partition_assets_tests.support.locations import safe_defs
from partition_assets_tests.support.published import Published, published_by
from partition_assets_tests.support.records import recorded_backfill

pytestmark = pytest.mark.slow

DAY = ("2024-01-01", "2024-01-01")  # one day of the three tables: three nodes
NEW_CONTENT = {safe_defs.FACTOR_ENV: "1.25"}
STAGES = [stage.name for stage in PUBLISH_STAGES]


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
