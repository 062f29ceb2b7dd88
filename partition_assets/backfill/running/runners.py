"""What runs a backfill's node runs: local worker processes (`DagsterNodeRunner`) or the
instance's run launcher (`LaunchedNodeRunner`), as the spec's `runs_via` says; and the
standby's warm workers reused for the backfill it adopts. Every runner gives its runs the
spec's run config."""

from collections.abc import Callable, Mapping
from concurrent.futures import Future
from types import MappingProxyType
from typing import Protocol

import dagster as dg

from partition_assets.backfill.model import RunsVia, RunUnit
from partition_assets.backfill.planning.spec import BackfillSpec
from partition_assets.backfill.running.launcher import LaunchedNodeRunner
from partition_assets.backfill.running.local_workers import DagsterNodeRunner, TaggedRunner


class NodeRunner(Protocol):
    """What runs a backfill's units: `DagsterNodeRunner` (local workers) or `LaunchedNodeRunner`."""

    def launch(self, unit: RunUnit, unit_tags: Mapping[str, str] = MappingProxyType({})) -> Future:
        """Starts `unit` as one run, also tagged `unit_tags`; the future gives a result per node of the unit."""

    def close(self) -> None:
        """Waits for the runs in flight (local workers) or leaves them to their launcher."""

    def terminate(self) -> None:
        """Stops the runs in flight, then closes."""


# Makes the runner of a spec's nodes in an instance, given the tags of each of its runs.
RunnerFactory = Callable[[BackfillSpec, dict[str, str], dg.DagsterInstance], NodeRunner]


def node_runner(spec: BackfillSpec, tags: dict[str, str], instance: dg.DagsterInstance) -> NodeRunner:
    """The runner `spec.runs_via` names: local worker processes, or the instance's run launcher."""
    if spec.runs_via == RunsVia.launcher:
        return LaunchedNodeRunner(spec.module, tags, instance, spec.run_config)
    return DagsterNodeRunner(spec.module, spec.max_parallel, tags, instance, spec.run_config)


def node_runner_reusing(warm: DagsterNodeRunner | None) -> RunnerFactory:
    """`node_runner`, except that a spec `warm` (local workers started before the backfill
    was known) serves runs on it, its runs tagged as the backfill's; `warm` is terminated
    when it cannot serve."""

    def runner_of(spec: BackfillSpec, tags: dict[str, str], instance: dg.DagsterInstance) -> NodeRunner:
        if warm is not None and spec.runs_via != RunsVia.launcher and warm.serves(spec.module, spec.max_parallel):
            return TaggedRunner(warm, tags, spec.run_config)
        if warm is not None:
            warm.terminate()
        return node_runner(spec, tags, instance)

    return runner_of
