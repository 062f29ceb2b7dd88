"""Running a backfill: the scheduling core (what to run when), the loop that runs it, the
coordinator of one backfill, and the two runners of node runs (local workers, the
instance's run launcher)."""
