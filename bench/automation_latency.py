"""Eager sensor latency in the `make dev` setup: `dagster dev` (webserver, daemon, the
repo's dagster.yaml) serving the automation test code location.

Each sample materializes one upstream partition at a random moment (so events also land
between the sensor's ticks) and times:
- requested: upstream materialization event -> downstream run created;
- started: downstream run created -> its run worker started (the run queue and process start).

Usage: python bench/automation_latency.py [--samples N] [--out bench/results/automation.md]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

# The repository's root, for partition_assets_tests.support (not installed with the package).
sys.path[:0] = [str(Path(__file__).resolve().parents[1])]
import dagster as dg

from partition_assets_tests.support.locations import automation_defs
from partition_assets_tests.support.webserver import DagsterDev

REPO = Path(__file__).resolve().parents[1]


def sample(instance: dg.DagsterInstance, day: int) -> tuple[float, float]:
    partition = f"2024-01-{day:02d}"
    assert dg.materialize([automation_defs.eager_up], partition_key=partition, instance=instance).success
    event = instance.fetch_materializations(
        dg.AssetRecordsFilter(dg.AssetKey("eager_up"), asset_partitions=[partition]), limit=1
    ).records[0]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        runs = [
            r
            for r in instance.get_run_records(dg.RunsFilter(tags={"dagster/partition": partition}))
            if dg.AssetKey("eager_down") in (r.dagster_run.asset_selection or ())
        ]
        if runs and runs[0].start_time:
            return (
                runs[0].create_timestamp.timestamp() - event.timestamp,
                runs[0].start_time - runs[0].create_timestamp.timestamp(),
            )
        time.sleep(0.05)
    raise TimeoutError(f"no downstream run for {partition}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=9)  # the code location has 10 days
    parser.add_argument("--out", default=str(REPO / "bench/results/automation.md"))
    args = parser.parse_args()
    random.seed(5)
    with tempfile.TemporaryDirectory() as workdir:
        dev = DagsterDev(Path(workdir), "partition_assets_tests.support.locations.automation_defs")
        try:
            dev.wait_until_ready()
            dev.start_sensor("eager")
            os.environ["DAGSTER_HOME"] = str(dev.home)
            with dg.DagsterInstance.get() as instance:
                time.sleep(6)  # the sensor's first tick places its cursor
                results = []
                for day in range(1, args.samples + 1):
                    time.sleep(random.uniform(0, 5))  # any phase of the sensor's 5 s loop
                    results.append(sample(instance, day))
                    print(f"sample {day}: requested {results[-1][0]:.2f} s, started {results[-1][1]:.2f} s")
        finally:
            dev.stop()
    requested = sorted(r for r, _ in results)
    started = sorted(s for _, s in results)
    load = os.getloadavg()[0]
    table = "\n".join(
        f"| {name} | {statistics.median(values):.2f} s | {max(values):.2f} s |"
        for name, values in (
            ("upstream event -> downstream run created", requested),
            ("run created -> run started", started),
        )
    )
    Path(args.out).write_text(
        "# Eager sensor latency (`make dev` setup)\n\n"
        f"{len(results)} upstream materializations at random moments, 2 cores, "
        f"load average {load:.1f} during the run.\n\n"
        "| interval | median | max |\n| --- | --- | --- |\n" + table + "\n"
    )
    print(Path(args.out).read_text())


if __name__ == "__main__":
    main()
