"""Approval before publish, as logic: the status table's rows for it, who requires it, the
approval's record (approver, expiry), the spec's fields on every surface, and a deployment's
policy (who approves, which launch options it refuses, who launched)."""

import argparse
import re
from datetime import UTC, datetime, timedelta

import dagster as dg
import pytest

from partition_assets.backfill.model import Approval, BackfillStatus
from partition_assets.backfill.planning.spec import BackfillSpec, add_spec_arguments, spec_config_class
from partition_assets.backfill.state import approval
from partition_assets.backfill.state.status import COMMANDS, TRANSITIONS, check_command, is_allowed
from partition_assets.errors import ApprovalConfigError, ApprovalError, BackfillPlanError, IllegalTransitionError

S = BackfillStatus
NOW = datetime(2024, 3, 1, 12, tzinfo=UTC)


def test_a_backfill_awaits_approval_only_after_running_and_leaves_only_by_publishing_or_discard():
    # Paused too: its runs in flight may finish, the gate pass, while it launches nothing new.
    assert {status for status in S if is_allowed(status, S.AWAITING_APPROVAL)} == {S.RUNNING, S.PAUSED}
    # Its publish refused by a commit made outside it, before any commit, is publish_refused (issue 39, hole 9).
    # Extended (`backfill extend`, issue 53), it waits paused for its new nodes, its approval dropped.
    assert TRANSITIONS[S.AWAITING_APPROVAL] == {S.PUBLISHING, S.PUBLISH_REFUSED, S.DISCARDED, S.PAUSED}
    assert COMMANDS["approve"] == {
        S.AWAITING_APPROVAL: S.PUBLISHING,
        S.GATE_FAILED: S.PUBLISHING,
        S.ROLLBACK_AWAITING_APPROVAL: S.ROLLING_BACK,  # a rollback waits for approval too (issue 50, hole 4)
    }
    assert COMMANDS["discard"][S.AWAITING_APPROVAL] == S.DISCARDED
    for command in ("publish", "cancel", "resume", "retry", "rollback"):
        assert S.AWAITING_APPROVAL not in COMMANDS[command], command


def test_publish_without_approval_and_a_second_approval_are_refused_naming_what_fits():
    with pytest.raises(IllegalTransitionError) as refused:
        check_command("b1", S.AWAITING_APPROVAL, "publish")
    assert "backfill b1 is awaiting_approval: cannot publish it" in str(refused.value)
    assert "`partition-assets backfill approve b1 --by NAME` publishes it" in str(refused.value)
    with pytest.raises(
        IllegalTransitionError, match=r"is published: cannot approve it, only a backfill \(or rollback\)"
    ):
        check_command("b1", S.PUBLISHED, "approve")


def test_a_rollback_awaits_approval_only_from_a_publish_and_leaves_only_by_rolling_back():
    assert {status for status in S if is_allowed(status, S.ROLLBACK_AWAITING_APPROVAL)} == {S.PUBLISHED, S.PUBLISHING}
    assert TRANSITIONS[S.ROLLBACK_AWAITING_APPROVAL] == {S.ROLLING_BACK}
    for command in ("publish", "cancel", "resume", "retry", "discard", "pause"):
        assert S.ROLLBACK_AWAITING_APPROVAL not in COMMANDS[command], command
    with pytest.raises(IllegalTransitionError) as refused:  # asked twice
        check_command("b1", S.ROLLBACK_AWAITING_APPROVAL, "rollback")
    assert "`partition-assets backfill approve b1 --by NAME` rolls it back" in str(refused.value)


def test_the_spec_decides_and_else_any_assets_metadata_requires_approval():
    asks = approval.backfill_approval()
    assert approval.requires_approval(None, [None, {}, asks])
    assert approval.requires_approval(None, [{approval.APPROVAL_METADATA_KEY: dg.TextMetadataValue("required")}])
    assert not approval.requires_approval(None, [None, {"owner": "finance"}])
    assert not approval.requires_approval("none", [asks])
    assert approval.requires_approval("required", [None])


def test_an_approval_names_its_approver_and_expires_after_its_duration():
    waiting = approval.awaiting(NOW, timedelta(hours=24))
    assert waiting == Approval(awaiting_since=NOW, expires_at=NOW + timedelta(hours=24))
    assert waiting.to_json() == {
        "awaiting_since": NOW.isoformat(),
        "expires_at": (NOW + timedelta(hours=24)).isoformat(),
    }
    assert Approval.from_json(waiting.to_json()) == waiting and Approval.from_json({}) is None
    assert not approval.expired(waiting, NOW + timedelta(hours=23))
    assert approval.expired(waiting, NOW + timedelta(hours=24))
    assert not approval.expired(approval.awaiting(NOW, None), NOW + timedelta(days=999))
    approved = approval.approved(waiting, " ana ", NOW)
    assert (approved.approved_by, approved.approved_at, approved.awaiting_since) == ("ana", NOW, NOW)
    with pytest.raises(ApprovalError, match="the approver '  ' is empty.*Nothing was written"):
        approval.approved(waiting, "  ", NOW)


def test_approval_is_a_spec_field_on_the_command_line_and_in_the_jobs_config():
    parser = argparse.ArgumentParser()
    add_spec_arguments(parser)
    args = parser.parse_args(["--select", "key:a", "--approval", "required", "--approval-expires", "24h"])
    assert (args.approval, args.approval_expires) == ("required", "24h")
    fields = spec_config_class().model_fields
    assert fields["approval"].default is None and fields["approval_expires"].default is None
    spec = BackfillSpec(module="m", selection="key:a", approval="required", approval_expires="7d")
    assert spec.approval_expires_after() == timedelta(days=7)
    assert BackfillSpec.from_json(spec.to_json()) == spec
    with pytest.raises(BackfillPlanError, match="--approval 'maybe' is not a choice: give one of required, none"):
        BackfillSpec(module="m", selection="key:a", approval="maybe")
    with pytest.raises(BackfillPlanError, match="--approval-expires '1 day' is not a duration"):
        BackfillSpec(module="m", selection="key:a", approval_expires="1 day")


def test_a_deployments_policy_is_read_from_its_settings_and_a_malformed_one_is_refused_naming_it():
    assert approval.ApprovalPolicy.from_settings(None) is None
    assert approval.ApprovalPolicy.from_settings({}) == approval.ApprovalPolicy(required=True, approvers=())
    policy = approval.ApprovalPolicy.from_settings({"required": False, "approvers": [" ana ", "bruno"]})
    assert policy == approval.ApprovalPolicy(required=False, approvers=("ana", "bruno"))
    for settings, text in [
        ({"approver": ["ana"]}, "not ['approver']"),
        ({"required": "yes"}, "required is 'yes': give true or false"),
        ({"approvers": "ana"}, "approvers is 'ana': give a list of non-empty names"),
        (["ana"], "give a mapping of `required`"),
    ]:
        with pytest.raises(ApprovalConfigError, match=re.escape(text) + ".*Nothing was written"):
            approval.ApprovalPolicy.from_settings(settings)


def test_under_a_policy_neither_the_launcher_nor_a_name_off_the_list_nor_another_than_the_runs_user_approves():
    listed = approval.ApprovalPolicy(approvers=("ana", "bruno"))
    listed.check_approver("b1", "bruno", launched_by="ana", dagster_user=None)
    for policy, approver, dagster_user, text in [
        (listed, "ana", None, "the approver 'ana' launched backfill b1"),
        (
            listed,
            "carol",
            None,
            "may not approve backfill b1: dagster.yaml `partition_assets: approval: approvers:` allows only ana, bruno",
        ),
        (
            approval.ApprovalPolicy(),
            "bruno",
            "carol@corp",
            "is not the Dagster user 'carol@corp' whose run approves backfill b1 (the run's 'user' tag)",
        ),
    ]:
        with pytest.raises(ApprovalError, match=re.escape(text) + ".*Nothing was written"):
            policy.check_approver("b1", approver, launched_by="ana", dagster_user=dagster_user)


def test_under_a_policy_no_launch_option_skips_a_required_approval_and_the_assets_ask_still_counts():
    policy = approval.ApprovalPolicy(required=False)
    asks = approval.backfill_approval()
    assert approval.requires_approval("none", [asks], policy)  # the spec no longer lifts what the asset asks
    assert not approval.requires_approval(None, [None], policy)
    assert approval.requires_approval(None, [None], approval.ApprovalPolicy())
    policy.check_launch("none", "staged", staged=True, required=False)  # nothing required: nothing skipped
    policy.check_launch(None, "staged", staged=True, required=True)
    for spec_approval, mode, text in [("none", "staged", "--approval none"), (None, "per-node", "--publish per-node")]:
        with pytest.raises(ApprovalError, match=re.escape(text) + ".*Nothing was recorded or run"):
            policy.check_launch(spec_approval, mode, staged=mode == "staged", required=True)


def test_the_launcher_is_the_dagster_user_else_the_name_given_else_the_os_user(monkeypatch):
    monkeypatch.setenv("LOGNAME", "osuser")
    assert approval.launcher(" ana ", "carol@corp") == "carol@corp"
    assert approval.launcher(" ana ", None) == "ana"
    assert approval.launcher(None, None) == "osuser"
