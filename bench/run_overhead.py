"""Wall time of one `dagster asset materialize` run of a single partition, by Spark mode.

- connect: runs attach to the shared local Spark Connect server (the default);
- in_process: each run starts its own classic driver JVM.

Usage: python bench/run_overhead.py [--runs N] [--out bench/results/run_overhead.md]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from partition_assets.spark import SparkResource

REPO = Path(__file__).resolve().parents[1]
DAGSTER = str(Path(sys.executable).parent / "dagster")
MODES = {"connect": {}, "in_process": {"PARTITION_ASSETS_SPARK_IN_PROCESS": "1"}}


def time_runs(mode_env: dict[str, str], runs: int, workdir: Path) -> list[float]:
    home = workdir / "dagster_home"
    home.mkdir(exist_ok=True)
    shutil.copy(REPO / "dagster.yaml", home / "dagster.yaml")
    env = {**os.environ, **mode_env, "DAGSTER_HOME": str(home), "PARTITION_ASSETS_LAKE": str(workdir / "lake")}
    seconds = []
    for run in range(runs):
        started = time.perf_counter()
        subprocess.run(
            [
                DAGSTER,
                "asset",
                "materialize",
                "-m",
                "partition_assets.example",
                "--select",
                "monthly_targets",
                "--partition",
                f"2024-{run + 1:02d}-01",
            ],
            cwd=REPO,
            env=env,
            check=True,
            capture_output=True,
        )
        seconds.append(time.perf_counter() - started)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", default=str(REPO / "bench/results/run_overhead.md"))
    args = parser.parse_args()

    SparkResource.from_env().local_server().ensure_running()
    results = {}
    for mode, mode_env in MODES.items():
        with tempfile.TemporaryDirectory() as workdir:
            results[mode] = time_runs(mode_env, args.runs, Path(workdir))
    connect, in_process = (statistics.median(results[m]) for m in ("connect", "in_process"))
    lines = [
        "# Per-run overhead: one single-partition `dagster asset materialize`",
        "",
        f"Command: `python bench/run_overhead.py --runs {args.runs}` (2 cores, local[2])",
        "",
        "| Spark mode | median s | runs (s) |",
        "| --- | --- | --- |",
        *(f"| {m} | {statistics.median(s):.2f} | {', '.join(f'{x:.2f}' for x in s)} |" for m, s in results.items()),
        "",
        f"Attaching to the shared Spark Connect server saves {in_process - connect:.2f} s per run "
        f"({in_process / connect:.2f}x faster than a JVM per run).",
    ]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
