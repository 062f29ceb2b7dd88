"""Per-node overhead of `backfill run --runs-via launcher` against local workers (the default).

Each mode runs the same backfill through the CLI: `wide` (0.05 s of work per partition)
over N days, one node at a time (`--max-parallel 1 --no-batch`), in a fresh DAGSTER_HOME
whose instance launches at once (DefaultRunCoordinator) with the DefaultRunLauncher.
A node's cycle is the time between the ends of consecutive node runs: launch, run,
noticing it finished, launching the next. The run's own span (its start to its end, as
the run storage records them) is shown beside it.

Usage: python bench/launcher_overhead.py [--nodes N] [--out bench/results/launcher_overhead.md]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The repository's root, for partition_assets_tests.support (not installed with the package).
sys.path[:0] = [str(Path(__file__).resolve().parents[1])]
import dagster as dg

from partition_assets.run_tags import BACKFILL_ID_TAG
from partition_assets_tests.support.cli_runs import LAUNCHING_INSTANCE_YAML, backfill_id, ok

REPO = Path(__file__).resolve().parents[1]
WORK_SECONDS = 0.05  # engine_defs.wide sleeps this long per partition
MODES = ("local", "launcher")


def run_mode(mode: str, nodes: int, workdir: Path) -> dict[str, float]:
    home = workdir / mode
    home.mkdir()
    (home / "dagster.yaml").write_text(LAUNCHING_INSTANCE_YAML)
    started = time.perf_counter()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "partition_assets",
            "backfill",
            "run",
            "-m",
            "partition_assets_tests.support.locations.engine_defs",
        ]
        + ["--select", "key:wide", "--start", "2024-01-01", "--end", f"2024-01-{nodes:02d}"]
        + ["--max-parallel", "1", "--no-batch", "--runs-via", mode],
        cwd=REPO,
        env={**os.environ, "DAGSTER_HOME": str(home)},
        capture_output=True,
        text=True,
        check=False,
    )
    makespan = time.perf_counter() - started
    backfill = backfill_id(ok(result))
    with dg.DagsterInstance.from_config(str(home)) as instance:
        records = instance.get_run_records(dg.RunsFilter(tags={BACKFILL_ID_TAG: backfill}))
        spans = sorted((r.start_time or 0.0, r.end_time or 0.0) for r in records if r.dagster_run.asset_selection)
    assert len(spans) == nodes, spans
    ends = [end for _, end in spans]
    return {
        "cycle": statistics.median(b - a for a, b in zip(ends, ends[1:], strict=False)),
        "run": statistics.median(end - start for start, end in spans),
        "makespan": makespan,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=6)
    parser.add_argument("--out", default=str(REPO / "bench/results/launcher_overhead.md"))
    args = parser.parse_args()

    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as workdir:
        results = {mode: run_mode(mode, args.nodes, Path(workdir)) for mode in MODES}
    load_after = os.getloadavg()[0]
    local, launcher = results["local"], results["launcher"]
    lines = [
        "# Per-node overhead: node runs through the run launcher against local workers",
        "",
        f"Command: `python bench/launcher_overhead.py --nodes {args.nodes}` (2 cores; 1-minute load average "
        f"{load_before:.1f} before, {load_after:.1f} after: the machine was shared)",
        "",
        f"{args.nodes} nodes of {WORK_SECONDS} s work, one at a time. Cycle: median time between the ends "
        "of consecutive node runs. Run: median span from the run's start to its end in the run storage.",
        "",
        "| runs via | cycle per node s | overhead per node s | run span s | makespan s |",
        "| --- | --- | --- | --- | --- |",
        *(
            f"| {mode} | {r['cycle']:.2f} | {r['cycle'] - WORK_SECONDS:.2f} | {r['run']:.2f} | {r['makespan']:.1f} |"
            for mode, r in results.items()
        ),
        "",
        f"The launcher adds {launcher['cycle'] - local['cycle']:.2f} s per node "
        f"({launcher['cycle'] / local['cycle']:.1f}x the local cycle): a run worker process per run "
        "that imports the code location, against a worker that keeps it loaded.",
    ]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
