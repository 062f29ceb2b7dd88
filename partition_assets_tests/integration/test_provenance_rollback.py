"""A rollback's materializations carry the provenance of the content they restore (issue 41,
with points 1, 2 and 6): after a staged backfill by commit 2 over partitions commit 1 made is
rolled back, and after a retract is rolled back, `--produced-by <commit 1>` selects those
partitions again and `--stale` (the code back at commit 1's) does not call them changed.

One git repository holds support/locations/retract_defs.py stamped with its commit (with_git_versions),
its lake in a temporary folder: commit 1 materializes both assets for DAYS in one range run;
commit 2 changes `daily_counts`'s code (not its result); commit 3 reverts it. Plans go through
the Python commands layer; the backfill runs through the real coordinator, workers, Spark and
instance (as test_release_reads_during_publish.py's)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest

from partition_assets.backfill.commands import plan_backfill, retract_partitions, rollback_backfill
from partition_assets.backfill.planning.instance_state import graph_of
from partition_assets.backfill.planning.spec import BackfillSpec
from partition_assets.backfill.running.coordinator import BackfillRun
from partition_assets.backfill.state.record import BackfillRecord
from partition_assets.backfill.state.store import BackfillStore
from partition_assets.code_location import load_definitions
from partition_assets.deploy import git_sha
from partition_assets_tests.support import REPO
from partition_assets_tests.support.git_repo import git

DAYS = ["2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04"]  # 2024-01-05 is never made
NEVER_MADE = "2024-01-05"
COUNT = 'F.count("*")'
CHANGED_COUNT = 'F.count("event_id")'  # the same rows (event_id is never null), another code version


@dataclass(frozen=True)
class Repo:
    location: Path
    instance: dg.DagsterInstance
    first: str  # the commit that made every partition of DAYS

    def commit(self, count: str, message: str) -> str:
        source = self.location.read_text()
        self.location.write_text(source.replace(COUNT, count).replace(CHANGED_COUNT, count))
        git(self.location.parent, "commit", "-qam", message)
        git_sha.cache_clear()  # the commit is read once per process; here it changes under it
        return git(self.location.parent, "rev-parse", "HEAD")

    def spec(self, selection: str = "key:events or key:daily_counts", **fields) -> BackfillSpec:
        return BackfillSpec(module=str(self.location), selection=selection, **fields)

    def reasons(self, **fields) -> dict[str, dict[str, str]]:
        """Per asset, per partition: the reason `plan_backfill` gives each node it plans over DAYS + 1."""
        planned = plan_backfill(self.spec(start=DAYS[0], end=NEVER_MADE, **fields), self.instance)
        return {
            key.to_user_string(): {p: reason.text() for p, reason in by_partition.items()}
            for key, by_partition in planned.graph.reasons.items()
        }


@pytest.fixture(scope="module")
def repo(spark_resource, home_template, tmp_path_factory) -> Iterator[Repo]:
    root = tmp_path_factory.mktemp("rollback_provenance")
    folder, home = root / "repo", root / "dagster_home"
    folder.mkdir()
    source = (REPO / "partition_assets_tests" / "support" / "locations" / "retract_defs.py").read_text()
    stamped = (
        source.replace('os.environ.get(LAKE_ENV, ".lake-retract-tests")', repr(str(root / "lake")))
        .replace(
            "defs = dg.Definitions(assets=[events, daily_counts], resources=resources)",
            "defs = with_git_versions(dg.Definitions(assets=[events, daily_counts], resources=resources), __file__)",
        )
        .replace(
            "import dagster as dg\n", "import dagster as dg\n\nfrom partition_assets.deploy import with_git_versions\n"
        )
    )
    assert "with_git_versions(dg.Definitions" in stamped and COUNT in stamped and str(root / "lake") in stamped
    location = folder / "retract_defs.py"
    location.write_text(stamped)
    git(folder, "init", "-q", "-b", "main")
    git(folder, "add", location.name)
    git(folder, "commit", "-qm", "commit 1")
    git_sha.cache_clear()
    shutil.copytree(home_template, home)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        result = (
            load_definitions(str(location))
            .resolve_implicit_global_asset_job_def()
            .execute_in_process(
                instance=instance,
                tags={"dagster/asset_partition_range_start": DAYS[0], "dagster/asset_partition_range_end": DAYS[-1]},
            )
        )
        assert result.success
        yield Repo(location, instance, git(folder, "rev-parse", "HEAD"))


def made_by_first(repo: Repo, assets: tuple[str, ...]) -> dict[str, dict[str, str]]:
    return {asset: {day: f"produced by {repo.first[:7]}" for day in DAYS} for asset in assets}


def test_a_rolled_back_backfill_leaves_its_partitions_produced_by_the_commit_that_made_their_content(repo):
    second = repo.commit(CHANGED_COUNT, "commit 2: daily_counts counts another column")
    spec = repo.spec("daily_counts", start=DAYS[0], end=DAYS[-1])
    record = BackfillRecord(spec, store=BackfillStore(repo.instance))
    BackfillRun(repo.instance, record, graph_of(spec, repo.instance), set()).run()
    assert repo.reasons(produced_by=second) == {"daily_counts": {day: f"produced by {second[:7]}" for day in DAYS}}

    rollback_backfill(repo.instance, record.id)

    assert repo.reasons(produced_by=repo.first) == made_by_first(repo, ("events", "daily_counts"))
    repo.commit(COUNT, "commit 3: revert commit 2")
    # Their content is commit 1's code's, which is the current code again: only the day never made is stale.
    assert repo.reasons(stale=True) == {"events": {NEVER_MADE: "missing"}, "daily_counts": {NEVER_MADE: "missing"}}


def test_a_rolled_back_retract_leaves_its_partitions_produced_by_the_commit_that_made_their_content(repo):
    retracted = retract_partitions(repo.spec("events", keys=DAYS[1:3], downstream=True), repo.instance)
    assert DAYS[1] not in repo.instance.get_materialized_partitions(dg.AssetKey("events"))

    rollback_backfill(repo.instance, retracted.backfill_id)

    assert repo.reasons(produced_by=repo.first) == made_by_first(repo, ("events", "daily_counts"))
    assert repo.reasons(stale=True) == {"events": {NEVER_MADE: "missing"}, "daily_counts": {NEVER_MADE: "missing"}}
