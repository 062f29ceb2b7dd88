"""Stamp a code location with its git commit: code versions, run tags, materialization metadata
(dagster_instance/recorded_versions.py names where each is recorded, and reads them back)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import cast

import dagster as dg

# Where a commit is recorded, and how to read it back, lives below the deploys; named here too.
from partition_assets.dagster_instance.recorded_versions import CODE_VERSION_TAG as CODE_VERSION_TAG
from partition_assets.dagster_instance.recorded_versions import GIT_SHA_METADATA, GIT_SHA_TAG, metadata_text
from partition_assets.dagster_instance.recorded_versions import recorded_git_sha as recorded_git_sha
from partition_assets.dagster_instance.recorded_versions import run_git_shas as run_git_shas

# Definitions is a record: Dagster's own mappers (map_asset_specs) rebuild it with this.
from partition_assets.dagster_internals import replace
from partition_assets.deploy.git import git_sha, source_version


def with_git_versions(defs: dg.Definitions, path: str | Path) -> dg.Definitions:
    """`defs` stamped with the commit of the git work tree holding `path` (pass `__file__`).

    - each executable asset without an explicit code_version gets `source_version` of its
      function, so the UI marks exactly the assets whose code changed as stale;
    - each asset's definition metadata, and the Definitions' metadata, hold `git_sha`;
      this package's IO managers copy it onto every materialization (others can use
      `git_sha_metadata`);
    - each asset runs a hook that tags its run `partition_assets/git_sha`, whatever launched
      it (the UI, `dagster asset materialize`, a sensor); the backfill engine also sets the
      tag when it creates a run.
    """
    sha = git_sha(path)
    tag_run = _run_tagging_hooks(sha)
    assets = []
    for item in defs.assets or []:
        if isinstance(item, dg.AssetsDefinition) and item.is_materializable:
            version = _op_source_version(item.node_def)
            item = item.map_asset_specs(_stamped(version, sha)).with_hooks(tag_run)
        assets.append(item)
    return replace(defs, assets=assets, metadata={**(defs.metadata or {}), GIT_SHA_TAG: dg.MetadataValue.text(sha)})


def _stamped(version: str | None, sha: str) -> Callable[[dg.AssetSpec], dg.AssetSpec]:
    def stamp(spec: dg.AssetSpec) -> dg.AssetSpec:
        return spec.replace_attributes(
            code_version=spec.code_version or version, metadata={**spec.metadata, GIT_SHA_METADATA: sha}
        )

    return stamp


def definitions_git_sha(defs: dg.Definitions) -> str | None:
    """The commit `with_git_versions` stamped on `defs`, if any."""
    value = (defs.metadata or {}).get(GIT_SHA_TAG)
    return metadata_text(value)


def git_sha_metadata(context: dg.OutputContext) -> dict[str, str]:
    """`{"git_sha": sha}` for an IO manager's `context.add_output_metadata`, when the asset is stamped."""
    sha = (context.definition_metadata or {}).get(GIT_SHA_METADATA)
    sha = metadata_text(sha)
    return {GIT_SHA_METADATA: sha} if sha else {}


def _op_source_version(node_def: dg.NodeDefinition) -> str | None:
    """The source version of an op-backed asset's function; None for graph-backed assets
    and functions whose source Python cannot find (built by exec, say)."""
    function = asset_function(node_def)
    if function is None:
        return None
    try:
        return source_version(function)
    except (OSError, TypeError):
        return None


def asset_function(node_def: dg.NodeDefinition) -> Callable[..., object] | None:
    """The user's function an op-backed asset runs (what its source version hashes); None for
    a graph-backed asset."""
    if not isinstance(node_def, dg.OpDefinition):
        return None
    # A decorated op keeps the user's function as `decorated_fn`; a plain one is the function.
    compute = node_def.compute_fn
    return cast(Callable[..., object], getattr(compute, "decorated_fn", compute))


def _run_tagging_hooks(sha: str) -> set[dg.HookDefinition]:
    # A hook, because the implicit asset job that the UI and `dagster asset materialize`
    # launch takes no tags from the code location; a hook runs in every run, on any surface.
    def tag(context: dg.HookContext) -> None:
        context.instance.add_run_tags(context.run_id, {GIT_SHA_TAG: sha})

    return {
        dg.success_hook(name="git_sha_tag_on_success")(tag),
        dg.failure_hook(name="git_sha_tag_on_failure")(tag),
    }
