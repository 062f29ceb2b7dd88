"""Walks a declared list of stages (after SQLMesh's plan/evaluator.py: the order is data, one
function per stage), records where it is, and resumes from there.

A stage is a name and a function of the walk's inputs that returns a small frozen result
(`StageResult`); a result whose `goes_on` is False stops the walk there (a backfill that now
awaits approval, one canceled meanwhile). Before a stage runs, the walk passes its failpoint
(`stage_<name>`, storage/failpoints.py), so a test can kill the process in any stage. After
it finishes, the walk records its name as the last stage finished (`Progress`): for a
backfill, in its record, by the store's compare-and-set (`RecordedProgress`). A stage that
raises, or stops the walk, is not recorded: the walk resumes at it (`first_unfinished`).

Not guaranteed: a stage killed after it took effect and before it was recorded runs again on
resume; each stage is idempotent, or skips what already took effect, for that reason.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import ClassVar, Generic, Protocol, TypeVar

from partition_assets.backfill.publishing.step_clock import StepClock
from partition_assets.backfill.state.record import BackfillRecord
from partition_assets.storage.failpoints import failpoint

Inputs = TypeVar("Inputs")


@dataclass(frozen=True)
class StageResult:
    """What a stage returns (each stage subclasses it as a frozen dataclass of its own)."""

    # Whether the walk goes on to the next stage (False: it stops here, this stage not finished).
    goes_on: ClassVar[bool] = True


@dataclass(frozen=True)
class Stage(Generic[Inputs]):
    """One stage: its `name` (as records keep it), what it does in a few words (`does`, for
    `backfill status --verbose`) and the function that runs it on the walk's inputs."""

    name: str
    does: str
    run: Callable[[Inputs], StageResult]

    @property
    def failpoint(self) -> str:
        """The failpoint at its start (storage/failpoints.py STAGE_POINTS)."""
        return f"stage_{self.name}"


class Progress(Protocol):
    """Where a walk is: the name of the last stage finished (None: none yet)."""

    @property
    def last_finished(self) -> str | None: ...

    def record(self, last_finished: str | None) -> None: ...


class RecordedProgress:
    """The progress kept in a backfill's record (`publish_stage`), written by the store's
    compare-and-set on the record's body (BackfillRecord.save): a record another process
    changed meanwhile is RecordChangedError, nothing written."""

    def __init__(self, record: BackfillRecord) -> None:
        self._record = record

    @property
    def last_finished(self) -> str | None:
        return self._record.publish_stage

    def record(self, last_finished: str | None) -> None:
        self._record.publish_stage = last_finished
        self._record.save()


class StageState(StrEnum):
    """Where a stage stands in a walk, as `backfill status --verbose` prints it."""

    DONE = "done"
    NEXT = "next"
    PENDING = "pending"


@dataclass(frozen=True)
class Walk:
    """What a walk did: each stage's result by name (the stages it ran), the stage whose result
    stopped it (None: it walked to the end) and each stage's wall seconds."""

    results: Mapping[str, StageResult]
    stopped_at: str | None
    clock: StepClock = field(compare=False)

    @property
    def finished(self) -> bool:
        return self.stopped_at is None


def walk(stages: Sequence[Stage[Inputs]], inputs: Inputs, progress: Progress, start: str) -> Walk:
    """Runs `stages` from the one named `start` on, in order, each on `inputs`, recording in
    `progress` each one that finishes; first records the stage before `start` as the last
    finished, so that a walk started again (a fresh gate) forgets a walk before it. Stops at
    a stage whose result does not go on; an error in a stage goes on, the stage unrecorded.

    Raises:
        ValueError: No stage is named `start`.
    """
    names = [stage.name for stage in stages]
    first = names.index(start)
    before = names[first - 1] if first else None
    if progress.last_finished != before:
        progress.record(before)
    results: dict[str, StageResult] = {}
    clock = StepClock()
    for stage in stages[first:]:
        failpoint(stage.failpoint)
        with clock.step(stage.name):
            result = stage.run(inputs)
        results[stage.name] = result
        if not result.goes_on:
            return Walk(results, stage.name, clock)
        progress.record(stage.name)
    return Walk(results, None, clock)


def first_unfinished(stages: Sequence[Stage[Inputs]], last_finished: str | None, at_least: str) -> str | None:
    """The first stage after `last_finished` (None: the first stage), but none before the one
    named `at_least`; None when every stage finished."""
    names = [stage.name for stage in stages]
    after = names.index(last_finished) + 1 if last_finished is not None else 0
    index = max(after, names.index(at_least))
    return names[index] if index < len(names) else None


def stage_states(stages: Sequence[Stage[Inputs]], last_finished: str | None) -> list[tuple[Stage[Inputs], StageState]]:
    """Each of `stages` with its state when `last_finished` is the last stage finished."""
    names = [stage.name for stage in stages]
    done = names.index(last_finished) + 1 if last_finished is not None else 0
    return [
        (stage, StageState.DONE if index < done else StageState.NEXT if index == done else StageState.PENDING)
        for index, stage in enumerate(stages)
    ]
