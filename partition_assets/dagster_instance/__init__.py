"""The pieces of a Dagster instance the engine builds on, below `backfill/`: lighter default
storage (storage.py), Dagster's migration scripts read once per process (migrations.py),
the partition wipe a retract uses (partition_wipe.py), and the tag that keeps Dagster's
backfill daemon off the engine's backfills (daemon_filter.py). The instance class that puts
the webserver's backfills on the engine is above `backfill/`, in `partition_assets.instance`."""
