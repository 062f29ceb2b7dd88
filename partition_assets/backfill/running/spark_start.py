"""The local Spark Connect server a backfill's node runs need, started before its first node
and announced: its start takes 10-30 s, which the first node that needed it spent silently.

A backfill whose nodes run here (`--runs-via local`) and one of whose assets needs a
SparkResource without `remote=` (as a resource of its own, or through its IO manager's
fields, as `partition_assets.definitions` wires it) finds its server started: a line says
so first, and one its time once it listens. A server already listening says nothing.

Not guaranteed: a SparkResource held deeper than an IO manager's or resource's own fields
is not seen; its server starts with the first node that needs it, silently, as before.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator

import dagster as dg

from partition_assets.spark.connect_server import LocalConnectServer
from partition_assets.spark.resource import SparkResource


def start_spark_for(definitions: dg.Definitions, assets: Iterable[dg.AssetKey], say: Callable[[str], None]) -> None:
    """Starts the local server of each SparkResource that `assets` need and that is not
    listening, saying so before and after.

    Raises:
        SparkConnectServerError: A server did not start, or its port holds one this project
            did not start (spark/connect_server.py); no node ran.
    """
    servers = {server.port: server for server in _local_servers(definitions, assets)}
    for server in servers.values():
        if server.is_running():
            continue
        say(f"spark: starting the local Spark Connect server at {server.url} (log: {server.log_path})")
        began = time.monotonic()
        server.ensure_running()
        say(f"spark: server ready in {time.monotonic() - began:.1f} s")


def _local_servers(definitions: dg.Definitions, assets: Iterable[dg.AssetKey]) -> Iterator[LocalConnectServer]:
    resources = dict(definitions.resources or {})
    asset_graph = definitions.resolve_asset_graph()
    needed = {key for asset in assets for key in asset_graph.get(asset).assets_def.required_resource_keys}
    for key in needed & set(resources):
        for spark in _spark_resources(resources[key]):
            if not spark.remote and not spark.in_process:
                yield spark.local_server()


def _spark_resources(resource: object) -> Iterator[SparkResource]:
    """`resource` if it is a SparkResource, else those among its fields (a ConfigurableResource's)."""
    if isinstance(resource, SparkResource):
        yield resource
    elif isinstance(resource, dg.ConfigurableResource | dg.ConfigurableIOManager):
        for name in type(resource).model_fields:
            value = getattr(resource, name, None)
            if isinstance(value, SparkResource):
                yield value
