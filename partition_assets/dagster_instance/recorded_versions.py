"""Where the commit and code version that made a materialization are recorded in a Dagster
instance, and how to read them back: the materialization's `git_sha` metadata, its run's
`partition_assets/git_sha` tag, Dagster's `dagster/code_version` tag. deploy/versioning.py
writes them when it stamps a code location; the provenance index, history selection and the
originals reader read them here, below the engine and the deploys.

Not guaranteed: a commit recorded by another tool under other names is not read.
"""

from __future__ import annotations

import dagster as dg

GIT_SHA_TAG = "partition_assets/git_sha"  # run tag, and the definitions' metadata key
GIT_SHA_METADATA = "git_sha"  # materialization metadata key
CODE_VERSION_TAG = "dagster/code_version"  # the tag Dagster gives a materialization its asset's code version
_RUNS_PER_QUERY = 500  # run ids per query (SQLite caps a statement's variables)


def recorded_git_sha(materialization: dg.AssetMaterialization) -> str | None:
    """The commit `materialization`'s metadata records (`git_sha`); None when it records none."""
    return metadata_text(materialization.metadata.get(GIT_SHA_METADATA))


def run_git_shas(instance: dg.DagsterInstance, run_ids: list[str]) -> dict[str, str]:
    """The commit each of `run_ids` is tagged with (`partition_assets/git_sha`), for those
    tagged: one query per 500 runs."""
    shas: dict[str, str] = {}
    for start in range(0, len(run_ids), _RUNS_PER_QUERY):
        for record in instance.get_run_records(dg.RunsFilter(run_ids=run_ids[start : start + _RUNS_PER_QUERY])):
            sha = record.dagster_run.tags.get(GIT_SHA_TAG)
            if sha:
                shas[record.dagster_run.run_id] = sha
    return shas


def metadata_text(value: object) -> str | None:
    """A metadata entry as text: definitions hold MetadataValues, contexts sometimes plain strings."""
    if isinstance(value, dg.MetadataValue):
        value = value.value
    return value if isinstance(value, str) else None
