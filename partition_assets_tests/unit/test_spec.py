"""The backfill spec is the one definition of a backfill's options: the command line's
flags and the Launchpad job's config come from it, the record stores it, every
surface validates through it."""

import argparse
import dataclasses
import json

import dagster as dg
import pytest

from partition_assets.automation.job import sparse_backfill_job
from partition_assets.backfill.model import InputsAsOf
from partition_assets.backfill.planning.graph import plan
from partition_assets.backfill.planning.run_config import SparseBackfillConfig
from partition_assets.backfill.planning.spec import BackfillSpec, add_spec_arguments, config_key_of, spec_from_arguments
from partition_assets.backfill.state.record import BackfillRecord
from partition_assets.backfill.state.store import BackfillStore
from partition_assets.code_location import load_definitions
from partition_assets.errors import BackfillPlanError
from partition_assets_tests.support.instances import temporary_instance

ENGINE_DEFS = "partition_assets_tests.support.locations.engine_defs"


def parsed(*argv: str) -> BackfillSpec:
    parser = argparse.ArgumentParser()
    add_spec_arguments(parser)
    return spec_from_arguments(parser.parse_args(argv), ENGINE_DEFS)


def test_every_spec_field_is_a_flag_and_a_job_config_field_with_the_same_default():
    fields = {f.name for f in dataclasses.fields(BackfillSpec)} - {"module"}
    parser = argparse.ArgumentParser()
    add_spec_arguments(parser)
    assert {action.dest for action in parser._actions} - {"help"} == fields
    assert set(SparseBackfillConfig.model_fields) == fields
    from_flags = parsed("--select", "key:raw")
    from_config = BackfillSpec(module=ENGINE_DEFS, **SparseBackfillConfig(selection="key:raw").model_dump())
    assert from_flags == from_config == BackfillSpec(module=ENGINE_DEFS, selection="key:raw")


def test_flags_become_the_same_spec_the_job_config_gives():
    from_flags = parsed(
        "--select",
        "key:raw+",
        "--start",
        "2024-01-01",
        "--end",
        "2024-01-31",
        "--static",
        "region=emea,apac",
        "--asset-limit",
        "raw=1",
        "--max-parallel",
        "3",
        "--lookback",
        "2",
        "--downstream",
        "--no-batch",
        "--catch-up",
        "--reverse",
        "--tag",
        "team=finance",
    )
    from_config = BackfillSpec(
        module=ENGINE_DEFS,
        **SparseBackfillConfig(
            selection="key:raw+",
            start="2024-01-01",
            end="2024-01-31",
            static={"region": ["emea", "apac"]},
            asset_limits={"raw": 1},
            max_parallel=3,
            lookback=2,
            downstream=True,
            batch=False,
            catch_up=True,
            reverse=True,
            tags={"team": "finance"},
        ).model_dump(),
    )
    assert from_flags == from_config


@pytest.mark.parametrize(
    ("values", "names"),
    [
        ({"selection": " "}, "the selection is empty"),
        ({"max_parallel": 0}, "max_parallel (--max-parallel) is 0"),
        ({"lookback": -2}, "lookback (--lookback) is -2"),
        ({"asset_limits": {"raw": 0}}, "asset limit raw=0"),
        ({"static": {"region": []}}, "static filter region=[]"),
        ({"start": "2024-01-01"}, "give both --start and --end"),
        ({"start": "yesterday", "end": "2024-01-02"}, "'yesterday' is not an ISO date"),
        ({"exact": True, "lookback": 1}, "contradict"),
        ({"tags": {"dagster/partition": "x"}}, "reserved prefix"),
    ],
)
def test_an_invalid_spec_is_refused_with_its_value_named_on_every_surface(values, names):
    with pytest.raises(BackfillPlanError) as refused:
        BackfillSpec(module=ENGINE_DEFS, **{"selection": "key:raw", **values})
    assert names in str(refused.value)


def test_a_refused_plan_names_the_spec_fields_as_the_surface_does():
    """The command line's flags by default; the Launchpad job's config keys when it plans."""
    asset_graph = load_definitions(ENGINE_DEFS).resolve_asset_graph()
    spec = BackfillSpec(module=ENGINE_DEFS, selection="key:raw", keys=["not-a-day"])
    with pytest.raises(BackfillPlanError, match=r"^--keys \['not-a-day'\] is no partition"):
        plan(asset_graph, spec)
    with pytest.raises(BackfillPlanError, match=r"^keys \['not-a-day'\] is no partition"):
        plan(asset_graph, spec, wording=config_key_of)
    filtered = BackfillSpec(module=ENGINE_DEFS, selection="key:raw", static={"planet": ["mars"]})
    with pytest.raises(BackfillPlanError, match=r"^static names \['planet'\]"):
        plan(asset_graph, filtered, wording=config_key_of)


def test_the_record_stores_the_spec_and_reads_records_written_before_it(home):
    spec = parsed("--select", "key:raw", "--start", "2024-01-01", "--end", "2024-01-02", "--tag", "team=a")
    with dg.DagsterInstance.get() as instance:
        BackfillRecord(spec, id="new", store=BackfillStore(instance)).save()
        assert BackfillStore(instance).load("new").spec == spec
    # A record file from before the spec: its fields at the top level, no catch_up/reverse/tags.
    legacy = home / "partition_assets" / "backfills"
    legacy.mkdir(parents=True)
    (legacy / "old.json").write_text(
        json.dumps(
            {
                "module": ENGINE_DEFS,
                "selection": "key:raw",
                "start": "2024-01-01",
                "end": "2024-01-02",
                "static": {},
                "max_parallel": 2,
                "asset_limits": {},
                "lookback": 0,
                "exact": False,
                "downstream": False,
                "batch": True,
                "status": "done",
                "id": "old",
            }
        )
    )
    with dg.DagsterInstance.get() as instance:  # the file is moved into the instance on first use
        old = BackfillStore(instance).load("old")
    assert (old.status, old.spec.max_parallel, old.spec.tags) == ("done", 2, {})


def test_the_launchpad_job_refuses_a_bad_config_before_recording_anything(home):
    job = sparse_backfill_job(ENGINE_DEFS)
    with temporary_instance(home) as instance:
        result = job.execute_in_process(
            run_config={
                "ops": {
                    "coordinate_backfill": {
                        "config": {
                            "selection": "key:raw",
                            "start": "2024-01-01",
                            "end": "2024-01-02",
                            "max_parallel": 0,
                        }
                    }
                }
            },
            instance=instance,
            raise_on_error=False,
        )
        failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
        assert "max_parallel (--max-parallel) is 0" in failure.event_specific_data.error.message
        assert not (home / "partition_assets").exists()
        assert [run.run_id for run in instance.get_runs()] == [result.run_id]


def test_a_record_stored_with_inputs_as_of_original_reads_it_as_the_typed_choice_and_stores_it_the_same():
    """A record body written before `InputsAsOf` (the plain word) reads as the choice, pinned
    to the originals (no time), and is stored again as the same word."""
    stored = {"module": ENGINE_DEFS, "selection": "key:raw", "inputs_as_of": "original", "publish": "per-node"}
    spec = BackfillSpec.from_json(stored)
    assert spec.inputs_as_of == InputsAsOf.original and spec.pinned_time() is None
    assert json.loads(json.dumps(spec.to_json()))["inputs_as_of"] == "original"
    with pytest.raises(BackfillPlanError, match="is neither 'original' nor an ISO time: give original or"):
        BackfillSpec.from_json({**stored, "inputs_as_of": "originally"})


def test_a_range_of_whole_days_is_described_as_days_whatever_surface_recorded_it():
    """The webserver records a launch of whole days by instants (adoption.py); `status` shows days."""
    from_dialog = BackfillSpec(
        module=ENGINE_DEFS, selection="*", start="2024-01-04T00:00:00+00:00", end="2024-01-06T23:59:59.999999+00:00"
    )
    assert from_dialog.describe() == "* 2024-01-04..2024-01-06"
    assert BackfillSpec(module=ENGINE_DEFS, selection="*", start="2024-01-02", end="2024-01-03").describe() == (
        "* 2024-01-02..2024-01-03"
    )
    hours = BackfillSpec(module=ENGINE_DEFS, selection="*", start="2024-01-04T06:00", end="2024-01-04T17:00")
    assert hours.describe() == "* 2024-01-04T06:00..2024-01-04T17:00"
