"""Engine backfills in Dagster's webserver: mirrored as Dagster backfills (mirror.py), and
those launched from *Materialize range* turned into engine backfills (adoption.py); the
nodes as Dagster's asset subsets, both ways (conversion.py)."""
