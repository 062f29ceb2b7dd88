"""Run tags: which backfill a run belongs to and which partitions it covers.

The one place that reads and writes them, so that the engine, its record and the
sensors agree on what a run covers (a single partition or a partition range).
"""

import json
from collections.abc import Mapping

import dagster as dg

BACKFILL_ID_TAG = "partition_assets/backfill_id"
# On the node runs of a staged backfill: their IO managers stage outputs and read the overlay.
STAGED_TAG = "partition_assets/staged"
# On each node run of a backfill: the proof, bound to the run's id, that its coordinator launched
# it (dagster_instance/lease_proof.py). The tags above only claim a backfill; re-execution copies them.
LEASE_PROOF_TAG = "partition_assets/lease_proof"
# On the node runs of a backfill with pinned inputs: how they were pinned ("original" or an
# ISO time), and the version each input table outside the backfill is read at (JSON).
INPUTS_AS_OF_TAG = "partition_assets/inputs_as_of"
PINNED_INPUTS_TAG = "partition_assets/pinned_inputs"
# On every run reading inputs through the IO managers: the version of the lake's release log
# its inputs are read by (storage/run_release.py), the log as it was at the run's start.
RELEASE_PIN_TAG = "partition_assets/release_log_version"
# On node runs submitted through the instance's run launcher (--runs-via launcher): canceling
# one asks the launcher to terminate it, wherever it executes.
LAUNCHED_TAG = "partition_assets/launched"
# On a coordinator run of the engine job that resumes a recorded backfill whose coordinator
# died (automation/takeover_sensor.py), as a re-execution of its coordinator run would.
TAKEOVER_TAG = "partition_assets/takeover"
# Added to a node run that succeeded without yielding its asset's output (`output_required=False`):
# its nodes are skipped, as Dagster skips such a step (backfill/running/skips.py).
SKIPPED_TAG = "partition_assets/skipped"
# Dagster's own tags (dagster/_core/storage/tags.py), spelled out: that module is private.
PARTITION_TAG = "dagster/partition"
RANGE_START_TAG = "dagster/asset_partition_range_start"
RANGE_END_TAG = "dagster/asset_partition_range_end"
# Runs of a Dagster backfill: the daemon's, and the engine's node runs (see is_backfill_run).
DAGSTER_BACKFILL_TAG = "dagster/backfill"
# Dagster records no materialization for the outputs of a run with this tag (execute_step.py,
# `assets_are_externally_managed`): a staged node run's data is not readable yet.
DEFER_ASSET_EVENTS_TAG = "dagster/defer_asset_events"
# The tags of a staged node run whose asset another IO manager writes as it runs (nothing holds
# it back until the publish): the run records its materialization, as Dagster's runs do.
RECORDED_AS_RUN = {DEFER_ASSET_EVENTS_TAG: "false"}

# Runs that may still materialize something.
IN_FLIGHT_STATUSES = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]


def defers_asset_events(tags: Mapping[str, str]) -> bool:
    """Whether a run with `tags` left its materializations to the publish (a staged node run);
    False for a run that records its own, such as one tagged RECORDED_AS_RUN."""
    return tags.get(DEFER_ASSET_EVENTS_TAG, "").lower() == "true"


def staging_backfill(tags: Mapping[str, str], proven_backfill: str | None) -> str | None:
    """The backfill whose staged data a run with `tags` writes and reads: the one the run proves
    it belongs to (`proven_backfill`, dagster_instance/lease_proof.py), when its tags say it stages; None
    for a run that publishes, and for a run whose tags claim a backfill it cannot prove."""
    return proven_backfill if tags.get(STAGED_TAG) == "true" else None


def dagster_backfill_of(tags: Mapping[str, str]) -> str | None:
    """The Dagster backfill a run with `tags` is a run of (tagged `dagster/backfill` by Dagster's
    backfill daemon); None for other runs, and for a run claiming an engine backfill: its node
    runs carry both tags, and only their lease proof shows them a backfill's (`is_backfill_run`)."""
    return None if BACKFILL_ID_TAG in tags else tags.get(DAGSTER_BACKFILL_TAG)


def is_backfill_run(tags: Mapping[str, str], proven_backfill: str | None) -> bool:
    """Whether a run with `tags` runs for a backfill rather than production: a node run of the
    engine backfill its lease proof proves (`proven_backfill`, dagster_instance/lease_proof.py),
    or a run of one of Dagster's own backfills (`dagster_backfill_of`; Dagster drops the tag when
    it re-executes a run of a finished backfill). A run that only claims an engine backfill by its
    id tag (typed in the Launchpad, copied by a re-execution, left from a finished backfill) is
    production's."""
    return proven_backfill is not None or dagster_backfill_of(tags) is not None


def node_run_tags(backfill_id: str, staged: bool) -> dict[str, str]:
    """The tags that mark a node run of backfill `backfill_id`: the engine's, and Dagster's
    (the webserver lists the run under the Dagster backfill of the same id)."""
    staging = {STAGED_TAG: "true", DEFER_ASSET_EVENTS_TAG: "true"} if staged else {}
    return {BACKFILL_ID_TAG: backfill_id, DAGSTER_BACKFILL_TAG: backfill_id, **staging}


def pinned_input_tags(inputs_as_of: str, versions: Mapping[str, int]) -> dict[str, str]:
    """The tags of a run whose inputs (asset -> table version) are pinned `inputs_as_of`."""
    return {INPUTS_AS_OF_TAG: inputs_as_of, PINNED_INPUTS_TAG: json.dumps(dict(versions), sort_keys=True)}


def pinned_inputs(tags: Mapping[str, str]) -> dict[str, int]:
    """The table version each pinned input of a run with `tags` is read at, by asset; {} when none is pinned."""
    return json.loads(tags[PINNED_INPUTS_TAG]) if PINNED_INPUTS_TAG in tags else {}


def range_tags(first: str, last: str) -> dict[str, str]:
    """The tags of a run over the partitions `first`..`last` (inclusive) of its assets."""
    return {RANGE_START_TAG: first, RANGE_END_TAG: last}


def partitions_of_run(run: dg.DagsterRun, partitions_def: dg.PartitionsDefinition | None) -> list[str]:
    """The partition keys `run` covers of an asset partitioned by `partitions_def`.

    Every key of its partition range, or its one partition key; [] when it names no
    partition (the asset is unpartitioned, or the run covers all of it). A range the
    definition does not hold (an unpartitioned asset, keys since removed) covers nothing.
    """
    first = run.tags.get(RANGE_START_TAG)
    if first is None:
        return [run.tags[PARTITION_TAG]] if PARTITION_TAG in run.tags else []
    last = run.tags[RANGE_END_TAG]
    if partitions_def is None or not all(partitions_def.has_partition_key(k) for k in (first, last)):
        return []
    return list(partitions_def.get_partition_keys_in_range(dg.PartitionKeyRange(first, last)))
