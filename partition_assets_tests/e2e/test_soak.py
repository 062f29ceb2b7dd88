"""The short soak (issue 55): bench/soak/soak.py with a fixed seed, 3 faults and a small DAG,
about 2 minutes: a staged backfill on Postgres and a Spark Connect server of its own while its
processes and servers are killed, production writes other partitions and library readers join
two of its tables; every invariant must hold (`make soak` runs the long one). Its upgrade form:
the previous release (bench/soak/upgrade.py) starts the backfill, this one takes it over."""

import os

import pytest

from bench.soak.soak import run_soak
from bench.soak.upgrade import DEFAULT_COMMIT

pytestmark = pytest.mark.slow

# Its schedule (bench/soak/faults.py draws it from the seed alone): a node run's process killed
# (which failed the backfill before: test_local_workers_death.py), the fork server killed, then
# the coordinator. Not seed 1 (a node run, Postgres crashed and restarted, the coordinator): it
# once left a run unended (bench/results/soak.md, open findings) and runs in `make soak` until
# that is found; a Postgres restart's own test is test_dagster_instance_storage.py's.
SEED = 4


# The upgrade form's schedule (scale 0.3): a whole process group of the coordinator killed at
# +11 s, then the coordinator alone 10 s later: around the upgrade, which comes once 20% of the
# nodes succeeded. No node run or fork server killed while the previous release runs: it hangs
# on a broken worker pool (fixed since; the deploy is then its operator's way out).
UPGRADE_SEED = 2


@pytest.fixture
def own_spark_port(monkeypatch):
    """A Spark server of its own, which the soak kills (the session's is shared): two ports above the session's."""
    monkeypatch.setenv(
        "PARTITION_ASSETS_SPARK_CONNECT_PORT", str(int(os.environ["PARTITION_ASSETS_SPARK_CONNECT_PORT"]) + 2)
    )


def test_a_short_soak_with_three_faults_holds_every_invariant(tmp_path, own_spark_port):
    held, report = run_soak(SEED, minutes=2, nodes=45, fault_count=3, scale=0.1, root=tmp_path, log=print)
    assert held, "\n".join(report)
    assert "VIOLATED" not in "\n".join(report)


def test_a_backfill_the_previous_release_started_is_upgraded_mid_way_under_faults(tmp_path, own_spark_port):
    held, report = run_soak(
        UPGRADE_SEED,
        minutes=1,
        nodes=12,
        fault_count=2,
        scale=0.3,
        root=tmp_path,
        log=print,
        previous=DEFAULT_COMMIT,
        upgrade_after=0.2,
    )
    text = "\n".join(report)
    assert held, text
    assert "- upgrade: held:" in text
