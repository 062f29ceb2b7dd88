"""What a backfill's coordinator shows in Dagster's webserver, as collaborators its caller
passes in: the Dagster backfill that mirrors its progress, and its gate's evaluations as
asset checks. backfill/dagster_ui/ implements them (`dagster_ui.view.WebserverView`); the
coordinator (running/coordinator.py) calls them, so that running/ never imports the layer
above it.

Not guaranteed: `HIDDEN`, the default, shows nothing: a backfill run with it is listed on
no Backfills page and its gate on no Checks tab (its record, ledger and runs are as ever).
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Protocol

import dagster as dg

from partition_assets.backfill.model import Node, NodeResult, NodeStatus, RunUnit
from partition_assets.backfill.planning.graph import BackfillGraph
from partition_assets.backfill.state.record import BackfillRecord

if TYPE_CHECKING:
    from partition_assets.backfill.publishing.gate_step import GateOutcome
    from partition_assets.dagster_internals import BaseAssetGraph


class BackfillMirror(Protocol):
    """A backfill's progress as its Dagster backfill shows it."""

    def launched(self, unit: RunUnit) -> None: ...

    def finished(self, result: NodeResult) -> None: ...

    def settle(self, status: Mapping[Node, NodeStatus]) -> None: ...


class DagsterView(Protocol):
    """How one coordinator run shows in Dagster's webserver."""

    def mirror(
        self,
        record: BackfillRecord,
        graph: BackfillGraph,
        asset_graph: BaseAssetGraph,
        instance: dg.DagsterInstance,
        done: Set[Node],
    ) -> AbstractContextManager[BackfillMirror]:
        """The Dagster backfill of `record`, kept in step while the block runs."""
        ...

    def record_gate(self, record: BackfillRecord, instance: dg.DagsterInstance, outcome: GateOutcome) -> None:
        """The gate's evaluation, recorded where Dagster shows it."""
        ...


class _Unmirrored:
    def launched(self, unit: RunUnit) -> None:
        """Shows nothing."""

    def finished(self, result: NodeResult) -> None:
        """Shows nothing."""

    def settle(self, status: Mapping[Node, NodeStatus]) -> None:
        """Shows nothing."""


class _Hidden:
    def mirror(
        self,
        record: BackfillRecord,
        graph: BackfillGraph,
        asset_graph: BaseAssetGraph,
        instance: dg.DagsterInstance,
        done: Set[Node],
    ) -> AbstractContextManager[BackfillMirror]:
        return nullcontext(_Unmirrored())

    def record_gate(self, record: BackfillRecord, instance: dg.DagsterInstance, outcome: GateOutcome) -> None:
        """Records nothing."""


# Nothing shown in Dagster's webserver (see the module docstring).
HIDDEN: DagsterView = _Hidden()
