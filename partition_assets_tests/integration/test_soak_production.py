"""The soak's production actor (bench/soak/actors.py) ends its own runs that Dagster's
`materialize` raised out of (issue 55, found by the soak: bench/soak/, seed 23): a Postgres
restart as `materialize` wrote its run's start left it NOT_STARTED for good, which the soak's
`nothing_held` named. Dagster's run monitoring ends a launched run that never started; a run
executed in process has none, so production, standing in for a deployment's schedule, ends it."""

import json

import dagster as dg

from bench.soak.actors import PRODUCTION_TURN_TAG, _end_cut_runs


@dg.op
def noop() -> None:
    pass


@dg.job
def scheduled() -> None:
    noop()


def test_production_ends_the_runs_of_its_cut_turns_and_no_other(instance, tmp_path):
    out = tmp_path / "production.jsonl"
    cut = instance.create_run_for_job(job_def=scheduled, tags={PRODUCTION_TURN_TAG: "7-1"})
    other = instance.create_run_for_job(job_def=scheduled, tags={PRODUCTION_TURN_TAG: "7-2"})

    assert _end_cut_runs(instance, ["7-1"], out) == []

    assert instance.get_run_by_id(cut.run_id).status == dg.DagsterRunStatus.FAILURE
    assert instance.get_run_by_id(other.run_id).status == dg.DagsterRunStatus.NOT_STARTED
    (line,) = [json.loads(text) for text in out.read_text().splitlines()]
    assert line["ended_unstarted"] == cut.run_id and line["status_was"] == "NOT_STARTED"
