"""The publishing stages (backfill/publishing/stages.py) end to end through `partition-assets
backfill` on real Spark, Delta tables and a Dagster instance: a coordinator killed (SIGKILL)
at the start of any stage has its record say which stage it finished last, and `resume` goes
on from the stage it was killed in, leaving exactly what an undisturbed publish of the same
backfill leaves (the tables, the ledger's rows, the release log's records, Dagster's publish
run and materializations, one `published` notification), no stage done twice. Killed inside
its Dagster publish run, the run a resume finds STARTED ends canceled."""

import signal

import dagster as dg
import pytest

from partition_assets.backfill.model import BackfillStatus
from partition_assets.backfill.publishing.dagster_events import PUBLISH_RUN_TAG
from partition_assets.backfill.publishing.stages import PUBLISH_STAGES
from partition_assets.run_tags import BACKFILL_ID_TAG
from partition_assets.storage.failpoints import ENV as FAILPOINT_ENV
from partition_assets_tests.support.cli_runs import backfill_id, ok
from partition_assets_tests.support.lakehouse import TABLES, Lakehouse
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

    bid = killed_at(house, f"stage_{stage}")
    before = STAGES[STAGES.index(stage) - 1] if STAGES.index(stage) else None
    assert recorded_backfill(house.home, bid).publish_stage == before  # where it is: the stage it finished last

    resumed_as_undisturbed(house, bid, versions, undisturbed)


def test_a_publish_killed_inside_its_dagster_run_has_that_run_canceled_by_the_resume_and_records_each_node_once(
    published_2_days, undisturbed
):
    """Found by the soak: a coordinator killed while its publish run recorded the
    materializations left that run STARTED for good. The resume ends it (canceled, saying
    why) before a new run records them; nothing is recorded twice."""
    house = published_2_days
    versions = house.versions()

    bid = killed_at(house, "partition_assets_publish_started")
    assert recorded_backfill(house.home, bid).publish_stage == "release"  # killed in `dagster_records`
    assert [run.status for run in publish_runs(house, bid)] == [dg.DagsterRunStatus.STARTED]

    resumed_as_undisturbed(house, bid, versions, undisturbed)  # one run succeeded, none unended, once per node
    runs = {run.status: run for run in publish_runs(house, bid)}
    assert set(runs) == {dg.DagsterRunStatus.CANCELED, dg.DagsterRunStatus.SUCCESS}
    with house.instance() as instance:
        canceled = instance.all_logs(
            runs[dg.DagsterRunStatus.CANCELED].run_id, of_type=dg.DagsterEventType.RUN_CANCELED
        )
    assert [entry.dagster_event.message for entry in canceled if entry.dagster_event] == [
        f"backfill {bid}: its publish was cut short and resumed"
    ]


def killed_at(house: Lakehouse, point: str) -> str:
    """The id of a backfill of DAY whose coordinator the failpoint `point` killed."""
    killed = house.backfill(*DAY, **NEW_CONTENT, **{FAILPOINT_ENV: point})
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    return house.newest_backfill()


def resumed_as_undisturbed(house: Lakehouse, bid: str, versions: dict[str, int], undisturbed: Published) -> None:
    """`resume` of the killed backfill `bid` publishes what an undisturbed one did, one commit per table."""
    ok(house.cli("resume", bid, **NEW_CONTENT))

    record = recorded_backfill(house.home, bid)
    assert record.status == BackfillStatus.PUBLISHED and record.publish_stage == STAGES[-1]
    assert published_by(house, bid) == undisturbed
    assert house.versions() == {table: version + 1 for table, version in versions.items()}  # one commit per table
    assert set(versions) == set(TABLES)


def publish_runs(house: Lakehouse, bid: str) -> list[dg.DagsterRun]:
    with house.instance() as instance:
        return list(instance.get_runs(dg.RunsFilter(tags={BACKFILL_ID_TAG: bid, PUBLISH_RUN_TAG: "true"})))
