"""The Dagster webserver's view of a coordinator run (running/dagster_view.py): its Dagster
backfill mirrored (mirror.py) and its gate's evaluations as `backfill_gate` asset checks
(gate_asset_checks.py). Every surface that runs a backfill passes `WEBSERVER` to its coordinator.

Not guaranteed: see mirror.py and gate_asset_checks.py.
"""

from __future__ import annotations

from collections.abc import Set
from typing import TYPE_CHECKING

import dagster as dg

from partition_assets.backfill.dagster_ui.gate_asset_checks import record_gate_evaluations
from partition_assets.backfill.dagster_ui.mirror import DagsterBackfillMirror
from partition_assets.backfill.model import Node
from partition_assets.backfill.planning.graph import BackfillGraph
from partition_assets.backfill.publishing.gate_step import GateOutcome
from partition_assets.backfill.running.dagster_view import DagsterView
from partition_assets.backfill.state.record import BackfillRecord

if TYPE_CHECKING:
    from partition_assets.dagster_internals import BaseAssetGraph


class WebserverView:
    """A coordinator run shown on the webserver's Backfills page and the assets' Checks tabs."""

    def mirror(
        self,
        record: BackfillRecord,
        graph: BackfillGraph,
        asset_graph: BaseAssetGraph,
        instance: dg.DagsterInstance,
        done: Set[Node],
    ) -> DagsterBackfillMirror:
        return DagsterBackfillMirror(record, graph, asset_graph, instance, done)

    def record_gate(self, record: BackfillRecord, instance: dg.DagsterInstance, outcome: GateOutcome) -> None:
        record_gate_evaluations(record, instance, outcome.stats, outcome.checks)


WEBSERVER: DagsterView = WebserverView()
