"""How many of a runner's workers load the code location at once (backfill/running/local_workers.py)."""

import pytest

from partition_assets.backfill.running.local_workers import loading_at_once


@pytest.mark.parametrize(
    ("workers", "cores", "at_once"),
    [(4, 2, 1), (4, 1, 1), (4, 4, 3), (4, 16, 4), (1, 8, 1)],
)
def test_workers_load_one_per_core_the_coordinator_leaves_free(workers, cores, at_once):
    assert loading_at_once(workers, cores) == at_once
