"""The short soak (issue 55): bench/soak/soak.py with a fixed seed, 3 faults and a small DAG,
about 2 minutes: a staged backfill on Postgres and a Spark Connect server of its own while its
processes and servers are killed, production writes other partitions and library readers join
two of its tables; every invariant must hold (`make soak` runs the long one)."""

import os

import pytest

from bench.soak.soak import run_soak

pytestmark = pytest.mark.slow

# Its schedule (bench/soak/faults.py draws it from the seed alone): a node run's process killed
# (which failed the backfill before: test_local_workers_death.py), Postgres crashed and restarted,
# then the coordinator killed.
SEED = 1


def test_a_short_soak_with_three_faults_holds_every_invariant(tmp_path, monkeypatch):
    # A Spark server of its own, which the soak kills (the session's is shared): two ports above the session's.
    monkeypatch.setenv(
        "PARTITION_ASSETS_SPARK_CONNECT_PORT", str(int(os.environ["PARTITION_ASSETS_SPARK_CONNECT_PORT"]) + 2)
    )
    held, report = run_soak(SEED, minutes=2, nodes=45, fault_count=3, scale=0.1, root=tmp_path, log=print)
    assert held, "\n".join(report)
    assert "VIOLATED" not in "\n".join(report)
