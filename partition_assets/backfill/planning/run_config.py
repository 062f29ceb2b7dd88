"""The engine job's run config from a spec: the job's name, its one op and that op's
config class, so that whatever launches the job (`run --detach`, the catch-up sensor, the
takeover sensor, a test) builds the config the job reads (automation/job.py).

Not guaranteed: the job itself is defined by the code location (`sparse_backfill_job`); a
location that names it otherwise is launched only by its own name.
"""

from enum import Enum

from partition_assets.backfill.planning.spec import BackfillSpec, spec_config_class

# The engine job's default name, as `run --detach` and the sensors launch it.
ENGINE_JOB = "sparse_backfill"
COORDINATOR_OP = "coordinate_backfill"

# The job's config schema: every BackfillSpec field but the code location.
SparseBackfillConfig = spec_config_class()


def spec_run_config(spec: BackfillSpec) -> dict:
    """Run config for the job that runs `spec` (its code location is the job's own)."""
    fields = spec.to_json()
    return backfill_run_config(
        **{name: value for name, value in fields.items() if name in SparseBackfillConfig.model_fields}
    )


def backfill_run_config(**config: object) -> dict:
    """Run config for the job, e.g. `backfill_run_config(selection="key:a", start=..., end=...)`.

    Args:
        **config: `BackfillSpec` fields but `module` (the job names its code location), by name.
    """
    values = SparseBackfillConfig(**config).model_dump(exclude_none=True)
    # Dagster's config takes an enum member by its name (backfill/model.py: the choices).
    return {"ops": {COORDINATOR_OP: {"config": {k: v.name if isinstance(v, Enum) else v for k, v in values.items()}}}}
