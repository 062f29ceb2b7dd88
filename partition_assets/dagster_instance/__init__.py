"""The pieces of a Dagster instance the engine builds on, below `backfill/`: lighter default
storage (storage.py), Dagster's migration scripts read once per process (migrations.py),
the partition wipe a retract uses (partition_wipe.py), and the tag that keeps Dagster's
backfill daemon off the engine's backfills (daemon_filter.py); compare-and-set on its
key-value store (key_values.py) and the lease proof of a backfill's node runs (lease_proof.py),
below `spark/` too, whose resource puts only a proven node run in the backfill pool. The
instance class that puts the webserver's backfills on the engine is above `backfill/`, in
`partition_assets.instance`."""
