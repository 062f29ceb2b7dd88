"""The tables a backfill writes: the assets its graph holds that a partition_assets IO
manager stores, with where and how.

Assets stored otherwise (another IO manager, no output) still run as nodes and are
recorded as materialized when the backfill publishes, but have no table to stage,
gate, lease or roll back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import dagster as dg

from partition_assets.backfill.planning.graph import BackfillGraph
from partition_assets.backfill.planning.keys import UNPARTITIONED
from partition_assets.dagster_internals import AssetGraph
from partition_assets.spark import SparkResource
from partition_assets.storage.io_manager import SparkTableIOManager
from partition_assets.storage.partition_scope import PartitionScope, partition_columns
from partition_assets.storage.table_format import (
    Capability,
    StagingFormat,
    TableFormat,
    required_staging,
    requires,
    staging,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class BackfillTable:
    """One asset's table and the partitions of it the backfill rewrites."""

    asset: dg.AssetKey
    uri: str
    table_format: TableFormat
    columns: tuple[str, ...]
    partitions_def: dg.PartitionsDefinition | None
    partition_keys: tuple[str, ...]  # the backfill's partitions of the asset, in partition order
    metadata: Mapping[str, Any]  # the asset's definition metadata (its gate, ...)
    spark: SparkResource  # the session its IO manager reads and writes with

    @property
    def scope(self) -> PartitionScope | None:
        """The backfill's partitions of the table; None for an unpartitioned table (all of it)."""
        if self.partitions_def is None:
            return None
        return PartitionScope.for_keys(self.partitions_def, self.partition_keys, self.columns)

    def spark_session(self) -> SparkSession:
        """The Spark session of its IO manager, connected on the first call."""
        return self.spark.spark_session

    def partition_key(self, row: tuple[str, ...]) -> str:
        """The partition key of a scope row (partition-column values)."""
        if not row:
            return UNPARTITIONED
        if isinstance(self.partitions_def, dg.MultiPartitionsDefinition):
            names = self.partitions_def.partition_dimension_names
            return str(dg.MultiPartitionKey(dict(zip(names, row, strict=True))))
        return row[0]

    @property
    def staging_format(self) -> StagingFormat:
        """Its format, which publishes staged backfills.

        Raises:
            UnsupportedByFormatError: The format lacks `staged_publish`; nothing was launched or written.
        """
        return required_staging(
            self.table_format,
            self.uri,
            f"run asset {self.asset.to_user_string()} with --publish per-node, or store it in a format that has it",
        )

    def check_stageable(self, keep_previous: bool) -> None:
        """Refuses, before a staged backfill launches anything, a format that cannot do what it
        asks: publish staged partitions, and with --keep-previous (`keep_previous`) keep the
        version before its publish.

        Raises:
            UnsupportedByFormatError: The format lacks a capability asked for; nothing was launched or written.
        """
        self.staging_format  # noqa: B018 -- raises for a format without staged_publish
        if keep_previous:
            requires(self.table_format, Capability.KEEP_PREVIOUS, self.uri, "run the backfill without --keep-previous")


# A backfill's tables by asset, upstream first (as `tables_of` gives them): what its publishing steps take.
Tables = Mapping[dg.AssetKey, BackfillTable]


def tables_of(definitions: dg.Definitions, graph: BackfillGraph) -> dict[dg.AssetKey, BackfillTable]:
    """The tables of `graph`'s assets that partition_assets IO managers store, in the
    graph's (topological) order."""
    asset_graph = definitions.resolve_asset_graph()
    resources = definitions.resources or {}
    tables = {}
    for key, asset_slice in graph.slices.items():
        node = asset_graph.get(key)
        io_manager = resources.get(node.io_manager_key)
        if not isinstance(io_manager, SparkTableIOManager) or not _has_output(asset_graph, key):
            continue
        metadata = dict(node.metadata)
        partitions_def = node.partitions_def
        tables[key] = BackfillTable(
            asset=key,
            uri=io_manager.table_uri(key, metadata),
            table_format=io_manager.table_format,
            columns=partition_columns(partitions_def, metadata) if partitions_def else (),
            partitions_def=partitions_def,
            partition_keys=tuple(asset_slice.partition_keys),
            metadata=metadata,
            spark=io_manager.spark,
        )
    return tables


@dataclass(frozen=True)
class InputTable:
    """A versioned table an asset of a backfill reads that the backfill does not rewrite."""

    asset: dg.AssetKey
    uri: str
    table_format: StagingFormat


def input_tables(definitions: dg.Definitions, graph: BackfillGraph) -> dict[dg.AssetKey, list[InputTable]]:
    """For each asset of `graph`, the inputs outside the graph that a partition_assets IO
    manager stores in a versioned format (the inputs a re-run can pin)."""
    asset_graph = definitions.resolve_asset_graph()
    resources = definitions.resources or {}
    found: dict[dg.AssetKey, list[InputTable]] = {}
    for key in graph.slices:
        found[key] = []
        for parent in sorted(asset_graph.get(key).parent_keys - set(graph.slices)):
            node = asset_graph.get(parent)
            io_manager = resources.get(node.io_manager_key)
            staged_by = staging(io_manager.table_format) if isinstance(io_manager, SparkTableIOManager) else None
            if isinstance(io_manager, SparkTableIOManager) and staged_by is not None:
                uri = io_manager.table_uri(parent, node.metadata)
                found[key].append(InputTable(parent, uri, staged_by))
    return found


def lake_root(definitions: dg.Definitions) -> str | None:
    """The lake of the code location (where its backfill ledger is kept): the root of
    its `io_manager` resource when partition_assets provides it, else of the first
    partition_assets IO manager; None when it has none."""
    resources = definitions.resources or {}
    managers = [resources.get("io_manager"), *resources.values()]
    roots = [m.root_uri.rstrip("/") for m in managers if isinstance(m, SparkTableIOManager)]
    return roots[0] if roots else None


def unstaged_assets(definitions: dg.Definitions, graph: BackfillGraph) -> list[dg.AssetKey]:
    """The assets of `graph` whose outputs another IO manager stores: it writes them as
    their nodes run, so a staged backfill cannot hold their data back until it publishes
    (assets with no output, or stored by a partition_assets IO manager, are not listed)."""
    asset_graph = definitions.resolve_asset_graph()
    resources = definitions.resources or {}
    unstaged = []
    for key in graph.slices:
        io_manager = resources.get(asset_graph.get(key).io_manager_key)
        if _has_output(asset_graph, key) and not isinstance(io_manager, SparkTableIOManager):
            unstaged.append(key)
    return unstaged


def _has_output(asset_graph: AssetGraph, key: dg.AssetKey) -> bool:
    """Whether the asset returns a value for an IO manager to store (not `-> None`)."""
    assets_def = asset_graph.assets_def_for_key(key)
    output = assets_def.node_def.output_def_named(assets_def.get_output_name_for_asset_key(key))
    return not output.dagster_type.is_nothing
