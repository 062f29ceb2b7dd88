"""Engine backfills in Dagster's webserver: mirrored as Dagster backfills, and those
launched from *Materialize range* turned into engine backfills."""
