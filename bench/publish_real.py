"""The real run's gate and publish at 1,000, 3,000 and 9,125 nodes (issue 44, point 3).

`partition-assets backfill run` of the example's hourly `events` and daily `daily_orders`
over 40, 120 and 365 days (1,000, 3,000 and 9,125 nodes), staged, 4 concurrent runs, on real
Spark (a local Spark Connect server started before the clock), a fresh lake and DAGSTER_HOME
with the repo's dagster.yaml each. The figures are the coordinator's own lines: the gate's
seconds, then the publish's and its split (table commits: staging checks, file moves, Delta
commits; Dagster's records: the publish run with a materialization per node; ledger: its rows
read and appended, the record's status).

Nothing is left out: every part of the publish is in the run's figure. What it does not
measure: a publish on Postgres (the repo's instance only) and tables that held data before
(the tables are created by the publish; a schema check of an existing table costs two log reads more).

Usage: python bench/publish_real.py [--days 40 120 365] [--spark-port 15301] [--out bench/results/publish_real.md]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

import scale_bench

GOAL_PUBLISH_SECONDS = scale_bench.GOAL_PUBLISH_SECONDS
_SECONDS = re.compile(r"\((\d+\.\d) s(?:: (.*))?\)$")


def phase(lines: list[str], prefix: str) -> tuple[float | None, str]:
    """The seconds and the split of the coordinator's line starting with `prefix`."""
    for line in lines:
        if line.startswith(prefix) and (match := _SECONDS.search(line)):
            return float(match.group(1)), match.group(2) or ""
    return None, ""


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--days", type=int, nargs="*", default=[40, 120, 365])
    parser.add_argument("--spark-port", type=int, default=15301)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results/publish_real.md"))
    args = parser.parse_args()

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    rows, largest = [], None
    for days in args.days:
        result = scale_bench.measure_real_run(days, args.spark_port, log)
        gate, _ = phase(result["phases"], "gate:")
        publish, split = phase(result["phases"], "published:")
        nodes = re.search(r"(\d+) succeeded", result["summary"])
        load = f"{scale_bench._load(result['load_before'])} -> {scale_bench._load(result['load_after'])}"
        rows.append(
            f"| {days} | {nodes.group(1) if nodes else '?'} | {result['seconds']:.0f} | {_seconds(gate)} | "
            f"**{_seconds(publish)}** | {split} | {load} |"
        )
        log(f"  {days}d: gate {gate} s, publish {publish} s ({split})")
        if days == max(args.days):
            largest = publish
    uptime_after = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    verdict = "NOT met" if largest is None or largest > GOAL_PUBLISH_SECONDS else "met"
    text = "\n".join(
        [
            "# The real run's gate and publish",
            "",
            f"Command: `{' '.join(['python bench/publish_real.py', *sys.argv[1:]])}`",
            "",
            f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC on {os.cpu_count()} cores; `uptime` before: `{uptime}`; "
            f"after: `{uptime_after}`.",
            "",
            (__doc__ or "").split("\n\n")[1].replace("\n", " "),
            "",
            "| days | nodes | run wall s | gate s | publish s | publish split | load |",
            "| --- | --- | --- | --- | --- | --- | --- |",
            *rows,
            "",
            f"Goal: the publish of 9,125 nodes <= {GOAL_PUBLISH_SECONDS:.0f} s in a real run: "
            f"{largest if largest is not None else '-'} s ({verdict}).",
            "",
        ]
    )
    Path(args.out).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
