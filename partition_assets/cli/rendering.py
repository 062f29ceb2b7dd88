"""The command line's renderings of command results (backfill/commands/results.py) as
terminal text: the plan, the ledger, the diff and the list of backfills. The status heatmap
is cli/heatmap.py.

Not guaranteed: the layout is for people; scripts read `--json` where a command has it, or
call the commands' Python functions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import dagster as dg

from partition_assets.backfill.commands import BackfillPlan, DiffReport, LedgerReport, Lineup
from partition_assets.backfill.planning.reasons import reason_lines
from partition_assets.backfill.publishing.diff import format_diff
from partition_assets.backfill.running.progress import counted
from partition_assets.backfill.state.ledger import LedgerEntry

_PATH_SHOWN = 6  # nodes of the critical path named
_IMPACT_SHOWN = 8  # assets of the impact named


def render_plan(plan: BackfillPlan) -> str:
    """Per asset: nodes, edges in, seconds per node and the runs its BackfillPolicy makes; totals,
    the critical path, the ETA, the impact outside the selection, schema changes, what catch-up
    skips and, when the instance's history picked the nodes, how many partitions of each asset
    each reason selected."""
    graph, seconds = plan.graph, plan.seconds_per_node
    lines = [f"{'asset':<32} {'nodes':>8} {'edges in':>9} {'s/node':>7}  runs"]
    for key, asset_slice in graph.slices.items():
        edges = sum(d.edge_count() for d in graph.dependencies[key])
        runs = plan.asset_runs[key].describe() if key in plan.asset_runs else ""
        lines.append(f"{key.to_user_string():<32} {len(asset_slice):>8} {edges:>9} {seconds[key]:>7.2f}  {runs}")
    path = plan.critical_path
    lines += [
        f"total: {counted(graph.node_count(), 'node')}, {counted(graph.edge_count(), 'edge')}",
        f"critical path: {counted(len(path), 'node')}, {plan.critical_seconds:.1f} s: "
        + " -> ".join(f"{n.asset.to_user_string()}[{n.partition}]" for n in path[:_PATH_SHOWN])
        + (" -> ..." if len(path) > _PATH_SHOWN else ""),
        f"ETA with {plan.spec.max_parallel} slots: {plan.eta_seconds:.1f} s (max of critical path and work/slots)",
        _describe_impact(plan.impacted),
        "plan only: nothing was launched",
    ]
    for schema_change in plan.schema_changes:
        lines += schema_change.describe()
    if plan.spec.catch_up:
        lines.append(f"catch-up: {plan.current_nodes} of {graph.node_count()} nodes are current and would be skipped")
    if graph.reasons:
        lines += ["why (partitions per reason):", *(f"  {line}" for line in reason_lines(graph.reasons))]
    return "\n".join(lines)


def plan_json(plan: BackfillPlan) -> dict[str, Any]:
    """The plan as `plan --json` prints it: its totals, per asset its policy and runs (`assets`:
    `policy` as Dagster prints it or null, `batching`, `runs`, `runs_exact`), and every node, in
    graph order, with why it is in the plan when the instance's history picked it (`reason`: a
    ReasonKind, `why`: its text)."""
    reasons = plan.graph.reasons
    nodes = []
    for node in plan.graph.nodes():
        entry: dict[str, Any] = {"asset": node.asset.to_user_string(), "partition": node.partition}
        reason = reasons.get(node.asset, {}).get(node.partition)
        if reason is not None:
            entry.update(reason=reason.kind.value, why=reason.text())
        nodes.append(entry)
    return {
        "nodes": nodes,
        "node_count": plan.graph.node_count(),
        "edge_count": plan.graph.edge_count(),
        "eta_seconds": plan.eta_seconds,
        "assets": {key.to_user_string(): runs.to_json() for key, runs in plan.asset_runs.items()},
    }


def _describe_impact(impacted: Mapping[dg.AssetKey, int]) -> str:
    if not impacted:
        return "impact: no asset outside the selection reads a rewritten partition"
    named = [f"{key.to_user_string()} ({count})" for key, count in impacted.items()]
    more = f" and {len(named) - _IMPACT_SHOWN} more" if len(named) > _IMPACT_SHOWN else ""
    assets = (
        "1 asset outside the selection reads" if len(named) == 1 else f"{len(named)} assets outside the selection read"
    )
    return (
        f"impact: {assets} rewritten partitions "
        f"(partitions affected; add --downstream to rewrite them too): {', '.join(named[:_IMPACT_SHOWN])}{more}"
    )


def render_diff(report: DiffReport) -> str:
    """A table per staged table, or why there is none."""
    if not report.tables:
        return f"backfill {report.backfill_id} has no staged data (it is {report.status})"
    return "\n".join(format_diff(table.rows) for table in report.tables)


def render_ledger(report: LedgerReport) -> str:
    """The ledger's rows as a table, then the previous versions kept (--keep-previous)."""
    return "\n".join([format_ledger(report.entries), *(report.previous_versions or ())])


def format_ledger(entries: tuple[LedgerEntry, ...] | list[LedgerEntry]) -> str:
    """The ledger rows as a terminal table."""
    lines = [f"{'asset':<28} {'partition':<22} {'status':<12} {'rows':>8} {'version':>7}  checksum"]
    for entry in entries:
        version = "-" if entry.published_version is None else str(entry.published_version)
        lines.append(
            f"{entry.asset:<28} {entry.partition or '-':<22} {entry.status.value:<12} {entry.rows or 0:>8} "
            f"{version:>7}  {entry.checksum or '-'}"
        )
    return "\n".join(lines)


def render_lineup(lineup: Lineup) -> str:
    """A line per backfill: status, priority, share, queue position, window."""
    return "\n".join(standing.line(lineup.at) for standing in lineup.standings)
