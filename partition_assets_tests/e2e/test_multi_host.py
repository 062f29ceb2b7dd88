"""One deployment on two hosts (README "Deployment: several hosts"): two DAGSTER_HOME folders,
each with its own working files, sharing one Postgres database (the README's storage block)
and one lake. A backfill host A starts is seen, canceled, discarded, rolled back and taken
over from host B (by `backfill resume`, then by the opt-in takeover sensor); the two hosts
share nothing else.

Not simulated: two machines. Both hosts run on this one, so a coordinator killed on A is
known dead at once (its process is gone) rather than after the lease TTL; a host name of
its own per host is not faked.
"""

import json
import os
import signal
import subprocess
import sys

from partition_assets_tests.support import REPO
from partition_assets_tests.support.cli_runs import ok
from partition_assets_tests.support.instances import URL_ENV
from partition_assets_tests.support.lakehouse import Lakehouse, days, expected_orders
from partition_assets_tests.support.locations import safe_defs

NEW = {safe_defs.FACTOR_ENV: "1.25"}
SLOW_NEW = {**NEW, safe_defs.SLOW_ENV: "2"}
NEW_1_5 = {safe_defs.FACTOR_ENV: "1.5"}
SLOW_1_5 = {**NEW_1_5, safe_defs.SLOW_ENV: "2"}
JANUARY_1_2 = ("2024-01-01", "2024-01-02")


def test_host_b_sees_cancels_rolls_back_and_takes_over_the_backfills_host_a_starts(
    tmp_path, postgres_server, monkeypatch
):
    url = postgres_server.create_database()
    monkeypatch.setenv(URL_ENV, url)  # this process reads both hosts' instances
    host_a = Lakehouse(tmp_path / "host_a", postgres_url=url)
    host_b = Lakehouse(tmp_path / "host_b", postgres_url=url, shares=host_a)
    ok(host_a.backfill(*JANUARY_1_2, "--publish", "per-node"))
    before = host_a.contents()

    # A runs a staged backfill; B reads its status and ledger.
    ok(host_a.backfill(*JANUARY_1_2, **NEW))
    published = host_a.contents()
    assert published["orders"] == expected_orders(days(1, 2), 1.25)
    bid = host_b.newest_backfill()
    assert ok(host_b.cli("status", bid)).startswith(f"backfill {bid} (published)")
    ledger = json.loads(ok(host_b.cli("ledger", bid, "--json")))
    assert {row["asset"] for row in ledger} == {"orders", "revenue", "revenue_report"}
    assert {row["status"] for row in ledger} == {"published"}

    # B rolls the published backfill back; A sees it.
    ok(host_b.cli("rollback", bid))
    assert host_a.contents() == before
    assert ok(host_a.cli("status", bid)).startswith(f"backfill {bid} (rolled_back)")

    # A runs another; B cancels it while it runs, then discards it (its leases go with it).
    running = host_a.start_backfill(*JANUARY_1_2, "--max-parallel", "1", **SLOW_NEW)
    host_a.wait_until_a_node_runs()
    canceled = host_b.newest_backfill()
    ok(host_b.cli("cancel", canceled))
    running.communicate(timeout=300)
    assert ok(host_a.cli("status", canceled)).startswith(f"backfill {canceled} (canceled)")
    ok(host_b.cli("discard", canceled))
    assert host_a.contents() == before

    # A's coordinator is killed mid-run; B notices, resumes it, and the tables end as the
    # uninterrupted run above left them.
    killed = host_a.start_backfill(*JANUARY_1_2, "--max-parallel", "1", **SLOW_NEW)
    host_a.wait_until_a_node_runs()
    taken_over = host_b.newest_backfill()
    os.killpg(killed.pid, signal.SIGKILL)  # the coordinator with its workers: a lost host
    killed.wait(timeout=60)
    noticed = ok(host_b.cli("status", taken_over))
    assert f"coordinator: silent (pid {killed.pid} on " in noticed, noticed
    assert f"`partition-assets backfill resume {taken_over}` takes it over" in noticed, noticed
    ok(host_b.cli("resume", taken_over, **NEW))
    assert host_a.contents() == published
    assert ok(host_a.cli("status", taken_over)).startswith(f"backfill {taken_over} (published)")

    # Opt-in: B's takeover sensor resumes the next one killed, in a coordinator run of the engine job.
    killed = host_a.start_backfill(*JANUARY_1_2, "--max-parallel", "1", **SLOW_1_5)
    host_a.wait_until_a_node_runs()
    sensed = host_b.newest_backfill()
    os.killpg(killed.pid, signal.SIGKILL)
    killed.wait(timeout=60)
    took_over = run_python(host_b, TAKE_OVER, **NEW_1_5)  # slow only until it is killed
    assert took_over.stdout.split() == [sensed, "True"], took_over.stdout + took_over.stderr
    assert host_a.content("orders") == expected_orders(days(1, 2), 1.5)
    assert ok(host_a.cli("status", sensed)).startswith(f"backfill {sensed} (published)")
    assert run_python(host_b, TAKE_OVER).stdout.split() == ["skipped"]  # taken over once


# As the daemon would on host B: evaluate the takeover sensor, then execute each run it requests.
# A run stuck past 6 minutes prints where each of its threads waits, and exits: the test fails
# with that in its message rather than at pytest's timeout with nothing from the process.
TAKE_OVER = """
import faulthandler, os
# To this process's standard error as it starts: a run's steps send fd 2 to its compute log.
faulthandler.dump_traceback_later(360, exit=True, file=open(os.dup(2), "w"))
import dagster as dg
from partition_assets.automation import coordinator_takeover_sensor
from partition_assets.run_tags import BACKFILL_ID_TAG
from partition_assets_tests.support.locations.safe_defs import backfill_job

with dg.DagsterInstance.get() as instance:
    requests = coordinator_takeover_sensor(backfill_job())(dg.build_sensor_context(instance=instance))
    for request in [] if isinstance(requests, dg.SkipReason) else requests:
        job = dg.reconstructable(backfill_job)
        result = dg.execute_job(job, instance, run_config=request.run_config, tags=request.tags)
        print(request.tags[BACKFILL_ID_TAG], result.success)
    if isinstance(requests, dg.SkipReason):
        print("skipped")
"""


def run_python(host: Lakehouse, code: str, **env: str) -> subprocess.CompletedProcess:
    """`code` in a fresh Python process of `host` (its instance, the shared lake)."""
    return subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=host.env(**env), capture_output=True, text=True, timeout=600
    )
