"""The transitions between a backfill's statuses (backfill/model.py `BackfillStatus`) that its
steps and commands make.

Every status change goes through `check_transition` (backfill/state/store.py applies it
as one compare-and-set in the instance's storage), so an illegal one is refused the same
way whoever asks: the coordinator, the UI mirror thread, `backfill cancel`, the
Launchpad job. The refusal names the status the backfill is in and the command that fits
it, and says that nothing was written.

Not guaranteed: a command allowed by this table may still be refused later for another
reason (a live coordinator, a foreign commit, a failed check); this table only says which
status may follow which.
"""

from __future__ import annotations

from partition_assets.backfill.model import BackfillCommand, BackfillStatus
from partition_assets.errors import IllegalTransitionError

S = BackfillStatus
C = BackfillCommand
# A backfill in one of these has nothing left to run or publish.
FINAL_STATUSES = frozenset({S.DONE, S.PUBLISHED, S.DISCARDED, S.ROLLED_BACK})

# What may follow running: its own steps (a node run, the gate, approval, the publish) and
# the commands that stop it. A paused backfill's coordinator keeps it, launching nothing, and
# its runs in flight may all finish or fail while it is paused: the same may follow it.
_AFTER_RUNNING = frozenset(
    {
        S.RUNNING,
        S.PAUSED,
        S.CANCELED,
        S.FAILED,
        S.DONE,
        S.GATE_FAILED,
        S.AWAITING_APPROVAL,
        S.PUBLISH_REFUSED,
        S.PUBLISHING,
        S.DISCARDED,
    }
)
# The statuses each status may become. A status may follow itself where a step is resumed
# (running, publishing, rolling back) or repeated harmlessly (a second cancel or pause).
TRANSITIONS: dict[BackfillStatus, frozenset[BackfillStatus]] = {
    S.RUNNING: _AFTER_RUNNING,
    S.PAUSED: _AFTER_RUNNING,
    S.CANCELED: frozenset({S.CANCELED, S.RUNNING, S.DISCARDED}),
    S.FAILED: frozenset({S.FAILED, S.RUNNING, S.CANCELED, S.DISCARDED}),
    S.GATE_FAILED: frozenset({S.RUNNING, S.CANCELED, S.PUBLISHING, S.PUBLISH_REFUSED, S.DISCARDED}),
    # Approval before publish (backfill/state/approval.py): approved (published), its publish
    # refused before any commit by a commit made outside the backfill, or discarded; extended
    # (`backfill extend`), it waits paused for its new nodes to run.
    S.AWAITING_APPROVAL: frozenset({S.PUBLISHING, S.PUBLISH_REFUSED, S.DISCARDED, S.PAUSED}),
    S.PUBLISH_REFUSED: frozenset({S.RUNNING, S.CANCELED, S.PUBLISHING, S.PUBLISH_REFUSED, S.DISCARDED}),
    # Discarded only while no table holds its publish commit (a publish killed before its first
    # commit, whose moved files a vacuum may have deleted: undo_steps.discard checks the logs).
    # Under an approval policy a rollback waits for an approval (rollback_awaiting_approval), then rolls back.
    S.PUBLISHING: frozenset(
        {S.PUBLISHING, S.PUBLISHED, S.PUBLISH_REFUSED, S.ROLLING_BACK, S.ROLLBACK_AWAITING_APPROVAL, S.DISCARDED}
    ),
    S.PUBLISHED: frozenset({S.ROLLING_BACK, S.ROLLBACK_AWAITING_APPROVAL}),
    S.ROLLBACK_AWAITING_APPROVAL: frozenset({S.ROLLING_BACK}),
    S.ROLLING_BACK: frozenset({S.ROLLING_BACK, S.ROLLED_BACK}),
    S.DONE: frozenset(),
    S.DISCARDED: frozenset(),
    S.ROLLED_BACK: frozenset(),
}

# What each status-changing command does, per status it accepts: the status it moves the
# backfill to first. A status absent from a command's row refuses the command. Every move
# here is also in TRANSITIONS; the rest of TRANSITIONS is the coordinator's own steps.
_STOPPABLE = (S.RUNNING, S.PAUSED, S.CANCELED, S.FAILED, S.GATE_FAILED, S.PUBLISH_REFUSED)
COMMANDS: dict[BackfillCommand, dict[BackfillStatus, BackfillStatus]] = {
    C.CANCEL: dict.fromkeys(_STOPPABLE, S.CANCELED),
    # A paused backfill whose coordinator died: resume runs it on, unpaused.
    C.RESUME: {**dict.fromkeys(_STOPPABLE, S.RUNNING), S.PUBLISHING: S.PUBLISHING, S.ROLLING_BACK: S.ROLLING_BACK},
    C.RETRY: dict.fromkeys((S.RUNNING, S.CANCELED, S.FAILED, S.GATE_FAILED, S.PUBLISH_REFUSED), S.RUNNING),
    C.PUBLISH: dict.fromkeys((S.GATE_FAILED, S.PUBLISH_REFUSED, S.PUBLISHING), S.PUBLISHING),
    C.DISCARD: dict.fromkeys((*_STOPPABLE, S.AWAITING_APPROVAL, S.PUBLISHING), S.DISCARDED),
    # Under an approval policy, a rollback not begun moves to rollback_awaiting_approval instead.
    C.ROLLBACK: dict.fromkeys((S.PUBLISHED, S.PUBLISHING, S.ROLLING_BACK), S.ROLLING_BACK),
    # Approving publishes (after a failed gate only with --force).
    C.APPROVE: {
        **dict.fromkeys((S.AWAITING_APPROVAL, S.GATE_FAILED), S.PUBLISHING),
        S.ROLLBACK_AWAITING_APPROVAL: S.ROLLING_BACK,
    },
    C.PAUSE: {S.RUNNING: S.PAUSED, S.PAUSED: S.PAUSED},
    # Widening its range (commands/extending.py): its nodes wait for `resume`, one awaiting approval paused.
    C.EXTEND: {S.PAUSED: S.PAUSED, S.CANCELED: S.CANCELED, S.FAILED: S.FAILED, S.AWAITING_APPROVAL: S.PAUSED},
    C.UNPAUSE: {S.PAUSED: S.RUNNING},
}

# What fits a backfill in each status, as the refusal's advice (`{id}` is the backfill's id).
_FITTING = {
    S.RUNNING: "watch it with `partition-assets backfill status {id}` or stop it with `partition-assets backfill "
    "cancel {id}`",
    # A paused backfill may have no coordinator (its coordinator died, or `extend` paused it):
    # unpause only tells a live one to go on.
    S.PAUSED: "`partition-assets backfill unpause {id}` lets its coordinator launch its nodes again (with no "
    "coordinator running, as after `extend`: `partition-assets backfill resume {id}` runs them), "
    "`partition-assets backfill cancel {id}` stops it",
    S.CANCELED: "`partition-assets backfill resume {id}` runs it on, `partition-assets backfill discard {id}` "
    "deletes its staged data",
    S.FAILED: "`partition-assets backfill retry {id}` re-runs its failed nodes, `partition-assets backfill "
    "discard {id}` deletes its staged data",
    S.DONE: "it is final (published per node): start a new backfill with `partition-assets backfill run`",
    S.GATE_FAILED: "review `partition-assets backfill diff {id}`, then `partition-assets backfill publish {id} "
    "--force` or `partition-assets backfill discard {id}`",
    S.AWAITING_APPROVAL: "review `partition-assets backfill diff {id}`, then `partition-assets backfill approve "
    "{id} --by NAME` publishes it, `partition-assets backfill discard {id}` deletes its staged data",
    S.PUBLISH_REFUSED: "`partition-assets backfill publish {id} --force` or `partition-assets backfill discard {id}`",
    S.PUBLISHING: "`partition-assets backfill resume {id}` finishes its publish, `partition-assets backfill "
    "rollback {id}` undoes it (`partition-assets backfill discard {id}` before any table is committed)",
    S.PUBLISHED: "use `partition-assets backfill rollback {id}` to undo it",
    S.DISCARDED: "it is final: start a new backfill with `partition-assets backfill run`",
    S.ROLLING_BACK: "`partition-assets backfill resume {id}` finishes its rollback",
    S.ROLLBACK_AWAITING_APPROVAL: "its rollback awaits approval: `partition-assets backfill approve {id} --by NAME` "
    "rolls it back",
    S.ROLLED_BACK: "it is final: start a new backfill with `partition-assets backfill run`",
}

# Why each command is refused wherever the table refuses it.
_REFUSED_BECAUSE: dict[BackfillCommand, str] = {
    C.CANCEL: "it is past canceling: there is nothing to cancel",
    C.RESUME: "there is nothing to resume",
    C.RETRY: "there is nothing to retry",
    C.PUBLISH: "only a backfill whose gate failed (or whose publish was refused or cut short) is published by hand",
    C.DISCARD: "its staged data is gone or part of the tables",
    C.ROLLBACK: "it is not published: there is nothing to roll back (or its rollback awaits approval)",
    C.APPROVE: "only a backfill (or rollback) awaiting approval, or one whose gate failed (with --force), is approved",
    C.PAUSE: "only a running backfill is paused: it has nothing left to launch",
    C.UNPAUSE: "it is not paused",
    C.EXTEND: "only a backfill that stopped short of publishing (paused, canceled, failed, awaiting approval) is "
    "extended: pause a running one and stop its coordinator once its runs in flight finished, or cancel it, then "
    "extend it and resume it",
    # A coordinator run (a re-executed or taken-over one, say) of a backfill past its node runs.
    C.RUN: "its nodes ran and it is past running",
}


def is_allowed(current: BackfillStatus, target: BackfillStatus) -> bool:
    """Whether a backfill in `current` may become `target`."""
    return target in TRANSITIONS[current]


def check_transition(
    backfill_id: str, current: BackfillStatus, target: BackfillStatus, action: BackfillCommand
) -> None:
    """Nothing when `current` may become `target`; else IllegalTransitionError naming
    `current`, the `action` refused and the command that fits `current`.

    Args:
        action: What asked for the change, as the refusal names it (e.g. cancel, publish).

    Raises:
        IllegalTransitionError: `current` may not become `target`; nothing was written.
    """
    if not is_allowed(current, target):
        raise _refusal(backfill_id, current, action, f"a {current.value} backfill may not become {target.value}")


def _refusal(
    backfill_id: str, current: BackfillStatus, action: BackfillCommand, otherwise: str
) -> IllegalTransitionError:
    because = _REFUSED_BECAUSE.get(action, otherwise)
    return IllegalTransitionError(
        f"backfill {backfill_id} is {current.value}: cannot {action} it, {because}; "
        f"{_FITTING[current].format(id=backfill_id)}. Nothing was written."
    )


def check_command(backfill_id: str, current: BackfillStatus, command: BackfillCommand) -> None:
    """Nothing when `command` (a key of COMMANDS) accepts a backfill in `current`; else
    IllegalTransitionError naming `current` and the command that fits it.

    Raises:
        IllegalTransitionError: `command` does not fit a backfill in `current`; nothing was written.
    """
    if current not in COMMANDS[command]:
        raise _refusal(backfill_id, current, command, f"a {current.value} backfill")
