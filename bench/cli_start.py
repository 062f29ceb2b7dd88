"""What a command costs before it does anything: CPU seconds of `partition-assets --help`,
`backfill --help`, `backfill plan` of a 20-node project, `backfill status` and `release list`, beside Dagster's
own `dagster --help` and `dagster asset list` on the same project (issue 52's goals: help
<= 0.3 CPU-s; plan <= 1.5x `dagster asset list`).

Each command runs `--repeat` times as a process of its own, in a fresh DAGSTER_HOME without a
command server (a served command starts in ~0.05 s, docs/guide/sparse-engine.md); its CPU is
the process's own user + system seconds (`os.wait4`), its wall time from launch to exit. The
project: 4 daily assets in a chain over 5 days on Dagster's default IO manager; one backfill is
run first so that `status` has one to show. The load average before and after is printed:
the figures are the machine's when it is loaded.

Usage: python bench/cli_start.py [--repeat 5] [--out bench/results/cli_start.md]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
PROJECT = """
import dagster as dg

DAYS = dg.DailyPartitionsDefinition(start_date="2024-01-01")


@dg.asset(partitions_def=DAYS)
def a1() -> int:
    return 1


@dg.asset(partitions_def=DAYS)
def a2(a1: int) -> int:
    return a1 + 1


@dg.asset(partitions_def=DAYS)
def a3(a2: int) -> int:
    return a2 + 1


@dg.asset(partitions_def=DAYS)
def a4(a3: int) -> int:
    return a3 + 1


defs = dg.Definitions(assets=[a1, a2, a3, a4])
"""
SPEC = ["--select", "*", "--start", "2024-01-01", "--end", "2024-01-05"]  # 4 assets x 5 days: 20 nodes


def measured(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of `command` run to its end; raises when it fails."""
    began = time.perf_counter()
    process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    stderr = process.stderr.read() if process.stderr else b""
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - began
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {process.returncode}: {stderr.decode()[-2000:]}")
    return usage.ru_utime + usage.ru_stime, wall


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--out", default=str(REPO / "bench/results/cli_start.md"))
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="cli_start_") as folder:
        root = Path(folder)
        (root / "twenty.py").write_text(PROJECT)
        (root / "home").mkdir()
        (root / "home/dagster.yaml").write_text("")
        env = {**os.environ, "DAGSTER_HOME": str(root / "home")}
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # each module compiled once, as `make bench` runs it
        engine, dagster = str(BIN / "partition-assets"), str(BIN / "dagster")
        ran = subprocess.run(
            [engine, "backfill", "run", "-f", "twenty.py", *SPEC], cwd=root, env=env, capture_output=True, text=True
        )
        found = re.search(r"backfill (\w+): 20 nodes", ran.stdout)
        if found is None:
            raise RuntimeError(f"the seeding backfill failed: {ran.stdout[-2000:]} {ran.stderr[-2000:]}")
        commands = {
            "partition-assets --help": [engine, "--help"],
            "partition-assets backfill --help": [engine, "backfill", "--help"],
            "partition-assets backfill run --help": [engine, "backfill", "run", "--help"],
            "partition-assets backfill plan (20 nodes)": [engine, "backfill", "plan", "-f", "twenty.py", *SPEC],
            "partition-assets backfill status": [engine, "backfill", "status", found.group(1)],
            "partition-assets release list (no release yet)": [engine, "release", "list", "--lake", str(root / "lake")],
            "dagster --help": [dagster, "--help"],
            "dagster asset list (same project)": [dagster, "asset", "list", "-f", "twenty.py"],
        }
        load_before = os.getloadavg()
        for command in commands.values():  # once unmeasured: bytecode written, files in the page cache
            measured(command, root, env)
        runs = {name: [measured(command, root, env) for _ in range(args.repeat)] for name, command in commands.items()}
        load_after = os.getloadavg()

    cpu = {name: statistics.median(c for c, _ in samples) for name, samples in runs.items()}
    wall = {name: statistics.median(w for _, w in samples) for name, samples in runs.items()}
    helps = [cpu[name] for name in commands if name.startswith("partition-assets") and name.endswith("--help")]
    plan_ratio = cpu["partition-assets backfill plan (20 nodes)"] / cpu["dagster asset list (same project)"]
    lines = [
        "# What a command costs before it does anything",
        "",
        f"Command: `python bench/cli_start.py --repeat {args.repeat}` "
        f"({datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores; load average "
        f"{' '.join(f'{x:.2f}' for x in load_before)} before, {' '.join(f'{x:.2f}' for x in load_after)} after)",
        "",
        f"Median of {args.repeat} runs, each a process of its own, after one unmeasured run; a fresh "
        "DAGSTER_HOME without a command server; the project: 4 daily assets in a chain, 5 days (20 nodes).",
        "",
        "| command | CPU s | wall s |",
        "|---|---:|---:|",
        *(f"| `{name}` | {cpu[name]:.2f} | {wall[name]:.2f} |" for name in commands),
        "",
        f"- help: {max(helps):.2f} CPU-s at most (goal <= 0.3)",
        f"- plan: {plan_ratio:.2f}x the CPU of `dagster asset list` (goal <= 1.5x)",
    ]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
