"""The Launchpad's operation jobs (automation/operations.py) refuse bad input as the command
line does: the run fails with the CLI's own message, and nothing is written."""

import pytest

from partition_assets.automation.operations import backfill_operation_jobs
from partition_assets.backfill.model import BackfillStatus
from partition_assets.backfill.state.store import BackfillStore
from partition_assets.cli.main import main
from partition_assets_tests.support.records import SPEC, record_at, version_of

S = BackfillStatus
JOBS = {job.name: job for job in backfill_operation_jobs()}


def launch(instance, job: str, **config):
    """A run of `job` with `config`, as the Launchpad launches it; the failure's description."""
    op = f"{job}_op"
    result = JOBS[job].execute_in_process(
        run_config={"ops": {op: {"config": config}}}, instance=instance, raise_on_error=False
    )
    assert not result.success
    (failure,) = [event for event in result.all_events if event.is_step_failure]
    return failure.step_failure_data.user_failure_data.description


def cli_refusal(instance, monkeypatch, capsys, *args: str) -> str:
    """What `partition-assets backfill <args>` prints on the same instance when it refuses."""
    monkeypatch.setenv("DAGSTER_HOME", instance.root_directory)
    capsys.readouterr()  # the job runs' logs
    assert main(["backfill", *args]) == 2
    return capsys.readouterr().err.strip()


@pytest.mark.parametrize(
    ("status", "job", "config", "command"),
    [
        (None, "backfill_approve", {"approver": "ana"}, ["approve", "--by", "ana"]),
        (S.PUBLISHED, "backfill_approve", {"approver": "ana"}, ["approve", "--by", "ana"]),  # approved twice
        (S.GATE_FAILED, "backfill_rollback", {}, ["rollback"]),
        (S.DISCARDED, "backfill_publish", {"force": True}, ["publish", "--force"]),
        (S.PUBLISHED, "backfill_extend", {"end": "2024-01-05"}, ["extend", "--end", "2024-01-05"]),
    ],
    ids=["unknown id", "approve twice", "rollback unpublished", "publish discarded", "extend published"],
)
def test_a_bad_input_fails_the_run_with_the_clis_message_and_writes_nothing(
    instance, monkeypatch, capsys, status, job, config, command
):
    store = BackfillStore(instance)
    backfill_id = "b1" if status is not None else "nosuch1"
    if status is not None:
        record_at(store, backfill_id, status, SPEC)
    before = version_of(store, backfill_id) if status is not None else None
    runs_before = len(instance.get_runs())

    refused = launch(instance, job, backfill_id=backfill_id, **config)
    expected = cli_refusal(instance, monkeypatch, capsys, command[0], backfill_id, *command[1:])
    assert expected == f"partition-assets backfill: {refused}"
    if status is None:
        assert "no backfill 'nosuch1' is recorded" in refused
        assert not store.exists(backfill_id)
    else:
        assert f"backfill {backfill_id} is {status.value}: cannot {command[0]} it" in refused
        assert "Nothing was written" in refused
        assert store.status(backfill_id) == status and version_of(store, backfill_id) == before
    assert len(instance.get_runs()) == runs_before + 1  # the refused run itself, and no other
