"""Issue 41, points 1-4: re-run what a commit made (`--produced-by`), what is stale (`--stale`),
and say why each node is in the plan.

One git repository holds a code location stamped with its commit (with_git_versions): commit 1
materializes four assets for 2024-01-01..04 through Dagster; commit 2 changes `counts`'s code
and materializes `orders` 2024-01-03 again. Plans are then checked through the Python commands
layer against that instance, each reason per node; one CLI process prints `plan --json` and the
counts per reason; the engine job plans from its config and logs the reasons.

The location's IO manager records no commit in the metadata: the commit is read from the runs'
`partition_assets/git_sha` tag (the metadata path is the bench's, bench/history_selection.py).
"""

from __future__ import annotations

import json
import shutil
import tracemalloc
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest

from partition_assets.automation import sparse_backfill_job
from partition_assets.backfill.commands import backfill_status, discard_backfill, plan_backfill
from partition_assets.backfill.model import BackfillStatus
from partition_assets.backfill.planning.history import pinned_history, plan_by_history
from partition_assets.backfill.planning.instance_state import graph_of
from partition_assets.backfill.planning.run_config import COORDINATOR_OP
from partition_assets.backfill.planning.spec import BackfillSpec, flag_of
from partition_assets.backfill.state.record import BackfillRecord
from partition_assets.backfill.state.store import BackfillStore
from partition_assets.backfill.state.stored_plan import stored_plan
from partition_assets.code_location import load_definitions
from partition_assets.dagster_instance.provenance_index import update_index
from partition_assets.deploy import git_sha
from partition_assets.deploy.git import source_version_at
from partition_assets.deploy.versioning import asset_function
from partition_assets.errors import BackfillPlanError, CommitRangeError, NoCodeVersionError, UnknownCommitError
from partition_assets_tests.support import generated_history
from partition_assets_tests.support.cli_runs import backfill_cli, ok
from partition_assets_tests.support.forbidden_calls import forbid_planner_and_git
from partition_assets_tests.support.git_repo import git
from partition_assets_tests.support.records import recorded_ids

LOCATION = '''
"""Four daily assets of the sales group and one graph-backed asset without a code version."""
import dagster as dg

from partition_assets.deploy import with_git_versions

DAYS = dg.DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-01-06")


@dg.asset(partitions_def=DAYS, group_name="sales")
def orders(context: dg.AssetExecutionContext) -> int:
    return 1


@dg.asset(partitions_def=DAYS, group_name="sales")
def revenue(orders: int) -> int:
    return orders * 2


@dg.asset(partitions_def=DAYS, group_name="sales")
def report(revenue: int) -> int:
    return revenue + 1


@dg.asset(partitions_def=DAYS, group_name="sales")
def counts(orders: int) -> int:
    return orders + {formula}


@dg.op
def one() -> int:
    return 1


@dg.graph_asset(partitions_def=DAYS, group_name="other")
def unversioned() -> int:
    return one()


defs = with_git_versions(dg.Definitions(assets=[orders, revenue, report, counts, unversioned]), __file__)
'''

MADE_BY_FIRST = ["2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04"]
SALES = ["orders", "revenue", "report", "counts"]


@dataclass(frozen=True)
class History:
    """The repository, its commits (0: no code; 1; 2: `counts` changed), the instance at `home`
    and its last event before commit 2 materialized anything."""

    location: Path
    home: Path
    instance: dg.DagsterInstance
    commits: tuple[str, str, str]
    before_second: int

    def plan(self, selection: str = "group:sales", **fields) -> dict[str, dict[str, str]]:
        """Per asset, per partition: the reason's text of each node `plan_backfill` plans."""
        spec = BackfillSpec(module=str(self.location), selection=selection, **fields)
        planned = plan_backfill(spec, self.instance)
        return {
            key.to_user_string(): {p: reason.text() for p, reason in by_partition.items()}
            for key, by_partition in planned.graph.reasons.items()
        }


def _commit(repo: Path, formula: int, message: str) -> str:
    (repo / "location.py").write_text(LOCATION.format(formula=formula))
    git(repo, "add", "location.py")
    git(repo, "commit", "-qm", message)
    return git(repo, "rev-parse", "HEAD")


def _materialize(location: Path, store: Path, instance: dg.DagsterInstance, selection: str, days: list[str]) -> None:
    git_sha.cache_clear()  # the commit is read once per process; here it changes under it
    assets = load_definitions(str(location)).assets or []
    for day in days:
        result = dg.materialize(
            assets,
            selection=selection,
            partition_key=day,
            instance=instance,
            resources={"io_manager": dg.FilesystemIOManager(base_dir=str(store))},
        )
        assert result.success


@pytest.fixture(scope="module")
def history(home_template, tmp_path_factory) -> Iterator[History]:
    root = tmp_path_factory.mktemp("history")
    repo, home = root / "repo", root / "dagster_home"
    shutil.copytree(home_template, home)
    repo.mkdir()
    (repo / "README.md").write_text("sales\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "README.md")
    git(repo, "commit", "-qm", "no code yet")
    first_of_all = git(repo, "rev-parse", "HEAD")
    location = repo / "location.py"
    with dg.DagsterInstance.from_config(str(home)) as instance:
        first = _commit(repo, 1, "counts: orders + 1")
        _materialize(location, root / "store", instance, "group:sales", MADE_BY_FIRST)
        before_second = instance.event_log_storage.get_maximum_record_id() or 0
        second = _commit(repo, 2, "counts: orders + 2")
        _materialize(location, root / "store", instance, "orders", ["2024-01-03"])
        git_sha.cache_clear()
        yield History(location, home, instance, (first_of_all, first, second), before_second)


def test_produced_by_selects_exactly_the_partitions_whose_latest_materialization_the_commit_made(history):
    _, first, second = history.commits
    by_first = history.plan(produced_by=first[:8], start="2024-01-01", end="2024-01-05")
    made = {day: f"produced by {first[:7]}" for day in MADE_BY_FIRST}
    assert by_first == {
        "orders": {d: r for d, r in made.items() if d != "2024-01-03"},  # made again by commit 2
        "revenue": made,
        "report": made,
        "counts": made,
    }
    assert history.plan(produced_by=second) == {"orders": {"2024-01-03": f"produced by {second[:7]}"}}


def test_produced_by_with_downstream_adds_what_those_partitions_feed_and_nothing_else(history):
    _, first, _ = history.commits
    plan = history.plan(selection="key:orders", produced_by=first, downstream=True)
    days = ["2024-01-01", "2024-01-02", "2024-01-04"]
    assert plan == {
        "orders": dict.fromkeys(days, f"produced by {first[:7]}"),
        "revenue": dict.fromkeys(days, "downstream of orders"),
        "report": dict.fromkeys(days, "downstream of orders"),
        "counts": dict.fromkeys(days, "downstream of orders"),
    }


def test_produced_by_a_range_takes_the_commits_git_rev_list_lists(history):
    first_of_all, first, second = history.commits
    assert history.plan(produced_by=f"{first}..{second}") == history.plan(produced_by=second)
    both = history.plan(produced_by=f"{first_of_all}..{second}")
    assert {asset: len(days) for asset, days in both.items()} == dict.fromkeys(SALES, 4)
    assert both["orders"]["2024-01-03"] == f"produced by {second[:7]}"
    assert both["orders"]["2024-01-01"] == f"produced by {first[:7]}"


def test_produced_by_a_rebased_range_names_the_commits_the_materializations_record(history, tmp_path):
    """Issue 50 (read in the code): after a rebase, A..B names new commit ids that no recorded
    materialization names; the plan was refused only as "none qualifies", without the cause."""
    _, first, second = history.commits
    rebased = tmp_path / "rebased"
    git(history.location.parent, "clone", "-q", str(history.location.parent), str(rebased))
    git(rebased, "rebase", "-q", "--root", "--exec", "git commit --amend -q -m rebased")  # every id changes
    root, head = git(rebased, "rev-list", "--max-parents=0", "HEAD"), git(rebased, "rev-parse", "HEAD")
    assert not {root, head} & set(history.commits)
    spec = BackfillSpec(module=str(rebased / "location.py"), selection="group:sales", produced_by=f"{root}..{head}")
    with pytest.raises(BackfillPlanError) as raised:
        plan_backfill(spec, history.instance)
    assert (
        f"no partition of the selection was produced by the 2 commits of {root}..{head}; the instance's "
        f"materializations name commits {second[:7]}, {first[:7]} (are they from before a rebase?"
    ) in str(raised.value)
    assert "nothing was planned" in str(raised.value)
    args = ["plan", "-f", str(spec.module), "--select", "group:sales", "--produced-by", f"{root}..{head}"]
    refused = backfill_cli(history.home, *args)  # as an empty selection is: bad input, one line
    assert refused.returncode == 2 and "(are they from before a rebase?" in refused.stderr, refused.stderr


def test_stale_selects_the_changed_asset_the_readers_of_a_remade_partition_and_the_missing(history):
    missing = {"2024-01-05": "missing"}  # the instance never made the last day
    expected = {
        "orders": missing,
        "revenue": {"2024-01-03": "upstream orders 2024-01-03 re-materialized", **missing},
        "report": missing,  # revenue 2024-01-03 was not made again: report read what revenue holds
        "counts": {**dict.fromkeys(MADE_BY_FIRST, "code version changed"), **missing},
    }
    assert history.plan(stale=True) == expected  # no range: every partition of the selection
    assert history.plan(stale=True, start="2024-01-03", end="2024-01-03") == {
        "revenue": {"2024-01-03": "upstream orders 2024-01-03 re-materialized"},
        "counts": {"2024-01-03": "code version changed"},
    }
    assert history.plan(selection="key:revenue", stale=True, downstream=True) == {
        "revenue": expected["revenue"],
        "report": {"2024-01-03": "downstream of revenue", "2024-01-05": "downstream of revenue"},
    }


def test_a_pinned_history_judges_the_instance_as_it_was_at_that_event(history):
    _, first, _ = history.commits
    spec = BackfillSpec(module=str(history.location), selection="key:orders", stale=True)
    assert (
        pinned_history(spec, history.instance).history_as_of
        == history.instance.event_log_storage.get_maximum_record_id()
    )
    # Before commit 2 made orders 2024-01-03 again, commit 1 had made it and revenue read it fresh.
    assert history.plan(produced_by=first, selection="key:orders", history_as_of=history.before_second) == {
        "orders": dict.fromkeys(MADE_BY_FIRST, f"produced by {first[:7]}")
    }
    then = history.plan(stale=True, start="2024-01-03", end="2024-01-03", history_as_of=history.before_second)
    assert then == {"counts": {"2024-01-03": "code version changed"}}  # revenue then read the latest orders


def test_the_code_version_a_commit_gives_an_asset_is_read_from_that_commit_s_source(history):
    """What matches a materialization that records no commit (produced_by's fallback)."""
    first_of_all, first, second = history.commits
    definitions = load_definitions(str(history.location))  # the checkout: commit 2
    counts = asset_function(definitions.resolve_assets_def("counts").node_def)
    assert counts is not None
    (made_by_first,) = history.instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey("counts"), asset_partitions=["2024-01-01"]), limit=1
    ).records
    recorded = (made_by_first.asset_materialization.tags or {})["dagster/code_version"]
    current = definitions.resolve_asset_graph().get(dg.AssetKey("counts")).code_version
    assert source_version_at(second, counts) == current
    assert source_version_at(first, counts) == recorded != source_version_at(second, counts)
    assert source_version_at(first_of_all, counts) is None  # the file did not exist yet


@pytest.mark.parametrize(
    ("fields", "error", "named"),
    [
        ({"produced_by": "0badc0de"}, UnknownCommitError, "'0badc0de' is no commit"),
        ({"produced_by": "{second}..{first}"}, CommitRangeError, "is no ancestor of"),
        ({"selection": "group:other", "stale": True}, NoCodeVersionError, "['unversioned']"),
    ],
)
def test_bad_history_selections_are_typed_errors_that_write_nothing(history, fields, error, named):
    _, first, second = history.commits
    fields = {k: v.format(first=first, second=second) if isinstance(v, str) else v for k, v in fields.items()}
    runs_before, records_before = len(history.instance.get_run_records()), recorded_ids(history.home)
    spec = BackfillSpec(module=str(history.location), **{"selection": "group:sales", **fields})
    with pytest.raises(error) as raised:
        plan_backfill(spec, history.instance)
    assert named in str(raised.value) and "nothing was planned" in str(raised.value)
    assert len(history.instance.get_run_records()) == runs_before and recorded_ids(history.home) == records_before


def test_plan_json_lists_every_node_s_reason_and_plan_prints_the_counts_per_asset(history):
    _, first, _ = history.commits
    args = ["plan", "-f", str(history.location), "--select", "group:sales", "--stale"]
    nodes = json.loads(ok(backfill_cli(history.home, *args, "--json")))["nodes"]
    assert {(n["asset"], n["partition"]): (n["reason"], n["why"]) for n in nodes if n["partition"] == "2024-01-03"} == {
        ("revenue", "2024-01-03"): ("upstream_rematerialized", "upstream orders 2024-01-03 re-materialized"),
        ("counts", "2024-01-03"): ("code_version_changed", "code version changed"),
    }
    assert len(nodes) == 9 and {n["reason"] for n in nodes} == {
        "missing",
        "upstream_rematerialized",
        "code_version_changed",
    }
    printed = ok(
        backfill_cli(history.home, *args, "--produced-by", first, "--start", "2024-01-01", "--end", "2024-01-05")
    )
    assert f"  counts: 4 produced by {first[:7]}, 1 missing" in printed
    assert f"  orders: 3 produced by {first[:7]}, 1 missing" in printed
    assert "  revenue: 4 produced by" in printed and "  report: 4 produced by" in printed


def test_the_engine_job_plans_from_produced_by_in_its_config_and_logs_the_reasons(history):
    _, _, second = history.commits
    job = sparse_backfill_job(str(history.location))
    config = {"selection": "group:sales", "produced_by": second}
    result = job.execute_in_process(
        run_config={"ops": {COORDINATOR_OP: {"config": config}}}, instance=history.instance, raise_on_error=False
    )
    logged = [e.message for e in history.instance.all_logs(result.run_id) if e.message]
    assert any(f"selected orders: 1 produced by {second[:7]}" in line for line in logged), logged
    assert result.success, logged
    # Recorded with the history it judged: resuming it plans the same node, made current since.
    (record,) = [BackfillStore(history.instance).load(i) for i in recorded_ids(history.home)]
    assert record.spec.produced_by == second and record.spec.history_as_of is not None
    assert record.spec.history_as_of < history.instance.event_log_storage.get_maximum_record_id()


def test_a_recorded_produced_by_backfill_is_read_from_its_stored_plan_with_no_git_call(history, tmp_path, monkeypatch):
    """Its status and discard read the nodes its record stores: neither asks git for the commit
    again, nor plans (issue 53: approving a backfill depended on the repository at approval time)."""
    _, first, _ = history.commits
    home = tmp_path / "dagster_home"
    shutil.copytree(history.home, home)  # its own instance: the other tests count the backfills recorded
    with dg.DagsterInstance.from_config(str(home)) as instance:
        spec = pinned_history(
            BackfillSpec(module=str(history.location), selection="group:sales", produced_by=first), instance
        )
        graph = graph_of(spec, instance)
        record = BackfillRecord(
            spec, store=BackfillStore(instance), status=BackfillStatus.FAILED, stored_plan=stored_plan(graph)
        )
        record.save()
        forbidden_calls = forbid_planner_and_git(monkeypatch)
        status = backfill_status(instance, record.id)
        assert status.graph.node_count() == graph.node_count() == 15
        assert discard_backfill(instance, record.id).backfill_id == record.id
    assert forbidden_calls == Counter()


def test_produced_by_holds_memory_for_the_partitions_it_selects_not_for_the_whole_history(home_template, tmp_path):
    """60 daily assets x 365 days (21,900 partitions) made by one commit, 30 days of the 6 chain
    heads made again by a second: `--produced-by` the second plans those 180 nodes holding what
    they need, not a row per partition of the history (that peaked at 14 MB here; now under 3 MB)."""
    repo, home = tmp_path / "repo", tmp_path / "dagster_home"
    shutil.copytree(home_template, home)
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    commits = [_commit(repo, formula, f"counts: orders + {formula}") for formula in (1, 2)]
    defs = generated_history.definitions(60, 365)
    keys, days = generated_history.asset_keys(defs), generated_history.days_of(defs)
    heads = keys[:: generated_history.CHAIN]
    with dg.DagsterInstance.from_config(str(home)) as instance:
        generated_history.write_events(
            instance,
            [(key, day, commits[0]) for key in keys for day in days]
            + [(key, day, commits[1]) for key in heads for day in days[-30:]],
        )
        spec = BackfillSpec(module=str(repo / "location.py"), selection="*", produced_by=commits[1])
        update_index(instance, progress=lambda line: None)  # built before planning, as the bound is planning's
        tracemalloc.start()
        try:
            graph = plan_by_history(defs, spec, instance, flag_of)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert graph.node_count() == len(heads) * 30
    # The candidates' keys (8 bytes a partition) and the plan's fixed costs, with a wide margin:
    # a row held per partition of the history is 14 MB here.
    assert peak < 4_000_000, f"planning 180 nodes of 21,900 partitions allocated {peak:,} bytes at its peak"
