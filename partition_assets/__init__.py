"""partition_assets: backfill-safe partitioned assets for Dagster + PySpark.

Rooms: `partitions` (definitions and mappings), `spark` (session resource),
`storage` (IO managers), `cli`, and `example` (the example code location).
"""
