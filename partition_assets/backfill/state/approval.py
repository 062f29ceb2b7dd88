"""Approval before publish: a staged backfill that requires it waits, once its gate passed,
in `awaiting_approval` (its leases parked, its assets frozen) until someone approves it
(`partition-assets backfill approve <id> --by NAME`, or the Launchpad's `backfill_approve`
job), it is discarded, or its approval expires (`--approval-expires 24h`: then discarded
instead of published).
After a failed gate, only an approval with `--force` publishes it.

Whether a backfill requires approval: its spec's `approval` (`--approval required|none`,
the job config's `approval`, the UI tag `partition_assets/approval`) when given; else
`required` when any asset it writes declares `backfill_approval()` in its metadata.

The approval's state lives in the backfill's record (`BackfillRecord.approval`): when it
started waiting, when that expires, who approved it and when; the ledger's `approved`
rows (one per partition, `approved_by`) keep who and when beside the data they approved.

A backfill whose gate failed starts its expiry then too: `approve --force` after the
expiry is refused, nothing written (`backfill discard <id>` ends it).

A deployment gives approval teeth in its dagster.yaml (`ApprovalPolicy`, read from the
instance's settings by `approval_policy`):

    partition_assets:
      approval:
        required: true            # every staged backfill waits for an approval (default true)
        approvers: [ana, bruno]   # who may approve (default: anyone but the launcher)

Then a backfill (a retract too) is approved by someone other than whoever launched it (its record's
`launched_by`: the Dagster user on the run or backfill where the instance knows one,
else the command's `--by`, else the OS user), by a name of `approvers` when listed, and,
from the Launchpad, by the Dagster user the run carries where the instance knows one.
No launch option or tag skips a required approval: `--approval none`, the UI tag
`partition_assets/approval=none`, `--publish per-node`, and a webserver backfill left to
Dagster's daemon (the tag `partition_assets/engine=dagster`, or no engine_modules) are
refused, nothing recorded or run. A rollback of a backfill whose publish requires approval waits the same way
(`rollback_awaiting_approval`), approved by someone other than whoever asked for it.
Without the setting, none of this applies.

Not guaranteed: an expired approval is discarded when someone next tries to approve it
(the approval is refused, naming the expiry); until then it keeps waiting, its leases
parked, and `backfill discard <id>` ends it. The rules hold between names, not people. On
the command line the approver and the launcher are the names given (`--by`, else the OS user
from the environment); in the Launchpad, the run's `user` tag (the Dagster user), else the
job config's `approver`; for a webserver backfill's launcher, its `user` tag. That tag is a
plain run tag: Dagster+ sets it to the user who launches, but on open-source Dagster anyone
who can launch a run can type `user=<name>` and approve or launch under that name, and a
shell has no identity to check. A backfill launched from the webserver without a `user` tag
records the OS user of the process running its coordinator as its launcher. Anyone who can
write the instance's database can change a record past these checks.
"""

from __future__ import annotations

import getpass
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from partition_assets.backfill.model import Approval, ApprovalChoice
from partition_assets.errors import ApprovalConfigError, ApprovalError

APPROVAL_METADATA_KEY = "partition_assets/approval"
# The tag on a backfill launched from the webserver's dialog that sets its spec's `approval`.
APPROVAL_TAG = "partition_assets/approval"
# The dagster.yaml section of the approval policy, under `partition_assets:`.
SETTINGS_KEY = "approval"
# The tag Dagster (Dagster+) puts on a run or backfill with its creator's user (dagster._core.storage.tags.USER_TAG).
DAGSTER_USER_TAG = "user"


def backfill_approval() -> dict[str, str]:
    """Asset metadata making every staged backfill that writes the asset wait for an
    approval (unless the backfill says `--approval none`): `@dg.asset(metadata=backfill_approval())`,
    merged with other metadata as `{**backfill_approval(), **backfill_gate(...)}`."""
    return {APPROVAL_METADATA_KEY: ApprovalChoice.required.value}


def requires_approval(
    spec_approval: str | None, asset_metadata: Iterable[Mapping[str, Any] | None], policy: ApprovalPolicy | None = None
) -> bool:
    """Whether a backfill requires approval: without a deployment `policy`, its spec's choice
    when given, else whether any of its assets' metadata asks for it; under a policy, also
    when the policy requires it, and a spec's `none` never lifts what the assets ask."""
    asked = any(
        _value((metadata or {}).get(APPROVAL_METADATA_KEY)) == ApprovalChoice.required for metadata in asset_metadata
    )
    if policy is not None:
        return policy.required or spec_approval == ApprovalChoice.required or asked
    if spec_approval is not None:
        return spec_approval == ApprovalChoice.required
    return asked


@dataclass(frozen=True)
class ApprovalPolicy:
    """A deployment's approval rules (see the module docstring): whether every staged
    backfill waits for an approval (`required`), and who may approve (`approvers`; empty:
    anyone but the launcher)."""

    required: bool = True
    approvers: tuple[str, ...] = ()

    @classmethod
    def from_settings(cls, settings: Any) -> ApprovalPolicy | None:
        """The policy of the `approval:` mapping under `partition_assets:` (None: not set, no policy).

        Raises:
            ApprovalConfigError: The mapping is malformed; nothing was written.
        """
        if settings is None:
            return None
        where = f"dagster.yaml `partition_assets: {SETTINGS_KEY}:`"
        unknown = sorted(set(settings) - {"required", "approvers"}) if isinstance(settings, Mapping) else None
        if unknown is None or unknown:
            raise ApprovalConfigError(
                f"{where} is {settings!r}: give a mapping of `required` (true or false) and `approvers` (a list of "
                f"names){f', not {unknown}' if unknown else ''}, e.g. {{required: true, approvers: [ana]}}. "
                "Nothing was written."
            )
        required, approvers = settings.get("required", True), settings.get("approvers", [])
        if not isinstance(required, bool):
            raise ApprovalConfigError(f"{where} required is {required!r}: give true or false. Nothing was written.")
        if not isinstance(approvers, list) or not all(isinstance(name, str) and name.strip() for name in approvers):
            raise ApprovalConfigError(
                f"{where} approvers is {approvers!r}: give a list of non-empty names, e.g. [ana, bruno], or leave "
                "it out (anyone but the launcher approves). Nothing was written."
            )
        return cls(required, tuple(name.strip() for name in approvers))

    def check_approver(
        self,
        backfill_id: str,
        approver: str,
        launched_by: str | None,
        dagster_user: str | None,
        asked: str = "launched backfill",
    ) -> None:
        """Refuses `approver` for backfill `backfill_id`, launched by `launched_by` (or whatever
        awaits approval asked for by them: `asked` says what they did, e.g. "asked for the
        rollback of backfill"), when the policy does not let them approve it; `dagster_user`:
        the Dagster user the approval's run carries, where the instance knows one.

        Raises:
            ApprovalError: `approver` may not approve it; nothing was written.
        """
        who = approver.strip()
        if dagster_user is not None and who != dagster_user:
            raise ApprovalError(
                f"the approver {who!r} is not the Dagster user {dagster_user!r} whose run approves backfill "
                f"{backfill_id} (the run's {DAGSTER_USER_TAG!r} tag): the run approves in its user's name; give "
                f"approver {dagster_user!r}, or have {who!r} launch the approval. Nothing was written."
            )
        if self.approvers and who not in self.approvers:
            raise ApprovalError(
                f"the approver {who!r} may not approve backfill {backfill_id}: dagster.yaml `partition_assets: "
                f"{SETTINGS_KEY}: approvers:` allows only {', '.join(self.approvers)}; ask one of them to approve. "
                "Nothing was written."
            )
        if launched_by is not None and who == launched_by:
            raise ApprovalError(
                f"the approver {who!r} {asked} {backfill_id}: this deployment (dagster.yaml "
                f"`partition_assets: {SETTINGS_KEY}:`) has it approved by someone other than who asked for it; "
                "ask another approver. Nothing was written."
            )

    def check_launch(self, spec_approval: str | None, publish_mode: str, staged: bool, required: bool) -> None:
        """Refuses a backfill whose options would skip an approval it requires (`required`):
        `--approval none` (or the UI tag), or a publish mode without a gate (`publish_mode`,
        not `staged`).

        Raises:
            ApprovalError: Its options skip a required approval; nothing was recorded or run.
        """
        if not required:
            return
        if spec_approval == ApprovalChoice.none:
            skipping = f"--approval {ApprovalChoice.none} (the UI tag {APPROVAL_TAG}={ApprovalChoice.none})"
        elif not staged:
            skipping = f"--publish {publish_mode} (each run publishes its partitions at once)"
        else:
            return
        raise ApprovalError(
            f"{skipping} skips the approval this backfill requires (dagster.yaml `partition_assets: {SETTINGS_KEY}:` "
            "or its assets' backfill_approval()): launch it staged, without that option, and approve it with "
            "`partition-assets backfill approve <id> --by NAME`. Nothing was recorded or run."
        )


def approval_policy(instance: Any) -> ApprovalPolicy | None:
    """The approval policy `instance`'s dagster.yaml declares (`partition_assets: approval:`,
    on an EngineBackfillInstance); None when it declares none.

    Raises:
        ApprovalConfigError: The declaration is malformed; nothing was written.
    """
    settings: Mapping[str, Any] = getattr(instance, "partition_assets_settings", {}) or {}
    return ApprovalPolicy.from_settings(settings.get(SETTINGS_KEY))


def launcher(given: str | None, dagster_user: str | None) -> str:
    """Who launches a backfill, as its record keeps it: the Dagster user the instance knows
    (`dagster_user`), else the name `given` (`--by`), else the OS user."""
    for name in (dagster_user, given):
        if name and name.strip():
            return name.strip()
    try:
        return getpass.getuser()
    except OSError:  # no login name in the environment, no passwd entry
        return f"uid {os.getuid()}"


def _value(value: Any) -> Any:
    """A metadata value as given (Dagster wraps a plain one in a TextMetadataValue)."""
    return getattr(value, "value", value)


def awaiting(now: datetime, expires_after: timedelta | None) -> Approval:
    """The record's approval when its backfill starts waiting at `now`."""
    return Approval(awaiting_since=now, expires_at=None if expires_after is None else now + expires_after)


def approved(state: Approval | None, approver: str, now: datetime) -> Approval:
    """`state` (None: the backfill never waited, e.g. its gate failed) approved by `approver` at `now`.

    Raises:
        ApprovalError: `approver` is empty; nothing was written.
    """
    if not isinstance(approver, str) or not approver.strip():
        raise ApprovalError(
            f"the approver {approver!r} is empty: name who approves (--by NAME, or the job config's approver), "
            "the ledger records it. Nothing was written."
        )
    return replace(state or Approval(), approved_by=approver.strip(), approved_at=now)


def expired(state: Approval | None, now: datetime) -> bool:
    """Whether the approval `state` awaits expired at or before `now` (never, when it awaits none)."""
    return state is not None and state.expired(now)


def freeze_id(backfill_id: str) -> str:
    """The id under which a backfill awaiting approval keeps its assets frozen: one no
    coordinator announces, so the freeze counts until approval, discard or expiry lifts it
    (backfill/publishing/freeze.py)."""
    return f"{backfill_id}.awaiting_approval"


def utc_now() -> datetime:
    """Bookkeeping time of an approval (not asset logic)."""
    return datetime.now(UTC)
