"""A backfill's record stores its plan (backfill/state/stored_plan.py): the commands on a recorded
backfill rebuild its graph from it, with no planner call and no git call, so approving, publishing
and rolling back a backfill never depend on the repository's state when they run; a record written
before plans were stored is planned once, on first read, and its plan stored; the stored plan
rebuilds the planned graph exactly, compactly.

The backfills run through the command line (a real coordinator, workers and instance); the
commands under test run in this process, against that instance, with the planner's entry points
and git's subprocess made to raise."""

import json
from collections import Counter
from pathlib import Path

import dagster as dg
import numpy as np

from partition_assets.backfill.commands import (
    approve_backfill,
    backfill_ledger,
    backfill_status,
    diff_backfill,
    discard_backfill,
    rollback_backfill,
)
from partition_assets.backfill.model import BackfillStatus, Node
from partition_assets.backfill.planning import instance_state
from partition_assets.backfill.planning.spec import BackfillSpec
from partition_assets.backfill.state.record import BackfillRecord
from partition_assets.backfill.state.store import BACKFILLS, BackfillStore, sql_run_storage
from partition_assets.backfill.state.stored_plan import graph_from, recorded_graph, stored_plan
from partition_assets.code_location import load_definitions
from partition_assets_tests.integration.test_backfill_extend import CODE_LOCATION, run_cli_backfill
from partition_assets_tests.support.forbidden_calls import forbid_planner_and_git

# A record as the code before stored plans wrote it (commit 0fe2d38): spec and fields, no plan.
RECORD_BEFORE_STORED_PLANS = Path(__file__).parents[1] / "support" / "record_before_stored_plans.json"


def test_approve_publish_and_rollback_make_no_planner_call_and_no_git_call(home, monkeypatch):
    backfill = run_cli_backfill(home, "2024-01-01", "2024-01-02", "--approval", "required", "--by", "alice")
    forbidden_calls = forbid_planner_and_git(monkeypatch)
    with dg.DagsterInstance.get() as instance:
        assert BackfillStore(instance).status(backfill) == BackfillStatus.AWAITING_APPROVAL
        assert backfill_status(instance, backfill).graph.node_count() == 4
        diff_backfill(instance, backfill)
        published = approve_backfill(instance, backfill, "bob")
        assert "approved by bob and published" in published.message
        backfill_ledger(instance, backfill)
        rollback_backfill(instance, backfill)
        assert BackfillStore(instance).status(backfill) == BackfillStatus.ROLLED_BACK
    assert forbidden_calls == Counter()


def test_a_record_written_before_stored_plans_is_planned_once_and_its_plan_stored(instance, monkeypatch):
    saved = json.loads(RECORD_BEFORE_STORED_PLANS.read_text())
    assert "plan" not in saved["body"]  # as the code before stored plans wrote it
    store = BackfillStore(instance)
    with sql_run_storage(instance).connect() as connection:
        connection.execute(
            BACKFILLS.insert().values(
                id=saved["id"], status=saved["status"], version=1, body=json.dumps(saved["body"]), created_at=0,
                updated_at=0,
            )
        )  # fmt: skip
    planned = Counter()
    real_graph_of = instance_state.graph_of

    def counted_graph_of(*args, **kwargs):
        planned["graph_of"] += 1
        return real_graph_of(*args, **kwargs)

    monkeypatch.setattr("partition_assets.backfill.state.stored_plan.graph_of", counted_graph_of)
    first = backfill_status(instance, saved["id"])
    again = backfill_status(instance, saved["id"])
    discarded = discard_backfill(instance, saved["id"])
    assert planned == Counter(graph_of=1)
    spec = BackfillSpec.from_json(saved["body"]["spec"])
    expected = real_graph_of(spec, instance)
    assert list(first.graph.nodes()) == list(again.graph.nodes()) == list(expected.nodes())
    record = store.load(saved["id"])
    assert record.stored_plan == stored_plan(expected)
    assert record.launched_by == "alice" and record.spec == spec  # its other fields as written
    assert record.status == BackfillStatus.DISCARDED and discarded.backfill_id == saved["id"]


def test_a_plan_another_process_stored_first_is_kept(instance):
    """Two commands reading the same old record: the second to store a plan keeps the first's."""
    spec = BackfillSpec(
        module=CODE_LOCATION,
        selection="key:source",
        start="2024-01-01",
        end="2024-01-02",
    )
    old = BackfillRecord(spec, id="old-record", store=BackfillStore(instance))
    old.save()
    reader = BackfillStore(instance).load("old-record")
    first = stored_plan(instance_state.graph_of(spec, instance))
    BackfillStore(instance).store_plan(old, first)
    BackfillStore(instance).store_plan(reader, {"format": 1, "assets": []})
    assert reader.stored_plan == first == BackfillStore(instance).load("old-record").stored_plan
    reader.skipped = {"source": ["2024-01-01"]}
    reader.save()  # its view is current: the plan stored meanwhile is no conflict


def test_the_stored_plan_rebuilds_the_planned_graph_exactly_and_compactly(instance):
    """The example's 365-day backfill (15,051 nodes of 17 assets: hourly, daily, weekly, monthly,
    static and multi-partitioned, with window, identity and static mappings)."""
    spec = BackfillSpec(
        module="partition_assets.example.definitions", selection="*", start="2024-01-01", end="2024-12-30"
    )
    planned = instance_state.graph_of(spec, instance)
    stored = stored_plan(planned)
    rebuilt = graph_from("bf", json.loads(json.dumps(stored)), load_definitions(spec.module).resolve_asset_graph())
    assert list(rebuilt.nodes()) == list(planned.nodes()) and planned.node_count() > 15_000
    for key, asset_slice in planned.slices.items():
        assert (rebuilt.slices[key].max_batch, rebuilt.slices[key].breaks) == (
            asset_slice.max_batch,
            asset_slice.breaks,
        )
    for key, dependencies in planned.dependencies.items():
        for kept, made in zip(rebuilt.dependencies[key], dependencies, strict=True):
            assert kept.upstream == made.upstream
            if made.explicit is None:
                assert np.array_equal(kept.starts, made.starts) and np.array_equal(kept.stops, made.stops), key
            else:
                assert kept.explicit is not None
                assert all(map(np.array_equal, kept.explicit, made.explicit)), key
    assert rebuilt.edge_count() == planned.edge_count()
    assert len(json.dumps(stored)) < 16_000  # the keys alone, listed, take 283 kB


def test_a_record_s_graph_comes_from_its_plan_not_from_its_spec(instance):
    """A stored plan is what the commands read, even where the spec would plan otherwise now."""
    spec = BackfillSpec(
        module=CODE_LOCATION,
        selection="key:source",
        start="2024-01-01",
        end="2024-01-03",
    )
    narrower = instance_state.graph_of(BackfillSpec.from_json({**spec.to_json(), "end": "2024-01-02"}), instance)
    record = BackfillRecord(spec, store=BackfillStore(instance), stored_plan=stored_plan(narrower))
    record.save()
    graph = recorded_graph(BackfillStore(instance).load(record.id), instance)
    assert list(graph.nodes()) == [Node(dg.AssetKey("source"), day) for day in ("2024-01-01", "2024-01-02")]
