"""What planning reads from the Dagster instance: the graph of a spec (against its code
location, the instance's dynamic partitions and, for `produced_by`/`stale`, its history),
and which of its nodes are current (what a catch-up backfill leaves alone, as runs:
planning/node_runs.py)."""

import dagster as dg

from partition_assets.backfill.model import Node
from partition_assets.backfill.planning.graph import BackfillGraph, plan
from partition_assets.backfill.planning.history import plan_by_history
from partition_assets.backfill.planning.node_run_config import check_run_config
from partition_assets.backfill.planning.node_runs import NodeRuns
from partition_assets.backfill.planning.policy_runs import check_batching
from partition_assets.backfill.planning.spec import BackfillSpec, Wording, flag_of
from partition_assets.code_location import load_definitions
from partition_assets.dagster_instance.partition_status import failed_partitions
from partition_assets.dagster_instance.provenance_index import materialized_partitions


def graph_of(spec: BackfillSpec, instance: dg.DagsterInstance, wording: Wording = flag_of) -> BackfillGraph:
    """The spec's graph, planned against its code location and the instance's dynamic partitions
    (and its materializations, when `produced_by` or `stale` pick the nodes: history.py);
    a refusal names the spec's fields as `wording` does (see `plan`). Its batching must have a
    policy to follow (policy_runs.check_batching) and its run config must match its assets'
    config schemas (node_run_config.check_run_config), or nothing is planned."""
    definitions = load_definitions(spec.module)
    if spec.selects_by_history():
        graph = plan_by_history(definitions, spec, instance, wording)
    else:
        graph = plan(definitions.resolve_asset_graph(), spec, dynamic_partitions_store=instance, wording=wording)
    check_batching(definitions.resolve_asset_graph(), graph.slices, spec.batching, wording)
    check_run_config(definitions, graph.slices, spec.run_config, wording("run_config"))
    return graph


def nodes_to_skip(spec: BackfillSpec, graph: BackfillGraph, instance: dg.DagsterInstance) -> NodeRuns:
    """What a new backfill of `spec` leaves alone: the current nodes with `catch_up`, else none."""
    return current_nodes(graph, instance) if spec.catch_up else NodeRuns(graph, {})


def current_nodes(graph: BackfillGraph, instance: dg.DagsterInstance) -> NodeRuns:
    """The graph's nodes that hold a materialization whose latest run did not fail since:
    what catch-up leaves alone (Dagster's partition status, as the UI colours it, read as its
    subsets: dagster_instance/partition_status.py), as runs of partitions per asset: a catch-up
    over years of history holds no node per current partition."""
    made = materialized_partitions(instance, graph.slices)
    for key, asset_slice in graph.slices.items():
        if asset_slice.partitions_def is not None:
            made[key] -= failed_partitions(instance, key, asset_slice.partitions_def, asset_slice.index_of)
    return NodeRuns.of_partitions(graph, made)


def materialized_nodes(graph: BackfillGraph, instance: dg.DagsterInstance) -> set[Node]:
    """The graph's nodes that hold a materialization in the instance (whatever ran since), as
    the provenance index lists them (dagster_instance/provenance_index.py, updated first)."""
    made = materialized_partitions(instance, graph.slices)
    return {
        Node(key, partition)
        for key, asset_slice in graph.slices.items()
        for partition in made[key]
        if partition in asset_slice.index_of
    }
