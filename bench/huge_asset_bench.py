"""100,000 partitions per asset, end to end (issue 54, part 2): an hourly asset over 12 years
(105,192 partitions) with a daily child (4,383), bench/huge_asset_defs.py.

On a fresh DAGSTER_HOME (the repo's dagster.yaml, SQLite), lake and state folder, each step a
command as a user types it, in a process of its own: its wall time, its CPU seconds and its
peak resident memory (`os.wait4`'s rusage: the command's own, and of the processes it waited
for: a run's workers), and the 1-minute load average when it started.

1. baseline: `dagster asset list -f bench/huge_asset_defs.py` (Dagster loading the same code
   location: what any command on it pays);
2. `backfill plan` of the whole range, both assets (109,575 nodes);
3. the history: every partition of both assets materialized once, except the 1% of days
   `missing_days` leaves out (their hours and the day), written as Dagster events in batches
   through the instance (history_selection_bench.write_events; not timed);
4. `backfill plan --catch-up` of the whole range: exactly the missing nodes;
5. `backfill run --catch-up`: runs them (no output, no IO manager: the assets store nothing;
   one run per contiguous range, their BackfillPolicy), stages and publishes (Dagster's
   records of every node, no table); the publish's own seconds as the command prints them;
6. `backfill status <id>`;
7. in Chromium (Playwright, Debian's /usr/bin/chromium), served by `dagster dev`: the backfill's
   page (`/runs/b/<id>`, the record the mirror wrote) and the asset's page (`/assets/hours`,
   Dagster's own, its partitions' status), each from navigation until its content is shown;
   the webserver's peak resident memory (VmHWM) after both.

Usage: python bench/huge_asset_bench.py [--years 12] [--max-parallel 4] [--no-ui]
           [--out bench/results/huge_asset.md]

Not guaranteed: the figures are the machine's at the load shown; the runs' bodies do nothing,
so the run step is the engine's cost, not a workload's.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import dagster as dg

# This checkout's package, bench modules and test helpers, even when the installed package is another work tree's.
sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).resolve().parents[1])]

from history_selection_bench import write_events
from huge_asset_defs import YEARS_ENV, all_days, definitions, history, missing_days

from partition_assets_tests.support.scale import fresh_environment

REPO = Path(__file__).resolve().parents[1]
DEFS = "bench/huge_asset_defs.py"
BIN = Path(sys.executable).parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]
GOALS = {  # seconds, issue 54
    "plan": 10.0,
    "catch-up plan": 5.0,
    "publish": 5.0,
    "status": 2.0,
    "backfill page": 5.0,
    "asset page": 5.0,
}


def timed(name: str, command: list[str], env: dict[str, str]) -> dict:
    """Runs `command` from REPO in `env`: wall and CPU seconds, peak RSS (MB), output."""
    load = os.getloadavg()[0]
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        process = subprocess.Popen(command, cwd=REPO, env=env, stdout=out, stderr=err)
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - started
        out.seek(0), err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise RuntimeError(f"{name}: {' '.join(command)} exited {code}:\n{stdout[-2000:]}\n{stderr[-3000:]}")
    print(f"  {name}: {seconds:.2f} s", file=sys.stderr, flush=True)
    return {
        "name": name,
        "command": " ".join(Path(command[0]).name if n == 0 else part for n, part in enumerate(command)),
        "seconds": seconds,
        "cpu": usage.ru_utime + usage.ru_stime,
        "peak_mb": usage.ru_maxrss / 1024,
        "load": load,
        "stdout": stdout,
    }


def backfill(*args: str) -> list[str]:
    return [str(BIN / "partition-assets"), "backfill", *args]


def planned_nodes(stdout: str) -> int:
    """The node count `backfill plan` printed."""
    found = re.search(r"([\d,]+) nodes", stdout)
    assert found, stdout[-2000:]
    return int(found.group(1).replace(",", ""))


def current_nodes(stdout: str) -> int:
    """The nodes `backfill plan --catch-up` would run: those it does not skip as current."""
    found = re.search(r"^catch-up: ([\d,]+) of ([\d,]+) nodes are current", stdout, re.M)
    assert found, stdout[-2000:]
    current, planned = (int(group.replace(",", "")) for group in found.groups())
    return planned - current


def page_loads(env: dict[str, str], root: Path, backfill_id: str, hours: int) -> list[dict]:
    """The backfill's page and the asset's page in Chromium, from navigation until each shows
    the count of `hours`'s partitions (targeted, materialized)."""
    from playwright.sync_api import sync_playwright

    from partition_assets_tests.support.webserver import DagsterDev

    sys.path.insert(0, str(REPO / "bench"))
    from scale_bench import _descendants, _peak_rss_mb

    dev = DagsterDev(root, module="huge_asset_defs", env=env, engine_modules=[])
    loads = []
    try:
        dev.wait_until_ready(timeout=600)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.set_default_timeout(120_000)
            for name, path, shown in (
                ("backfill page", f"/runs/b/{backfill_id}", f"text={hours:,}"),
                ("asset page", "/assets/hours?view=partitions", f"text=Materialized ({hours})"),
            ):
                load = os.getloadavg()[0]
                started = time.perf_counter()
                page.goto(dev.url + path)
                page.locator(shown).first.wait_for()
                seconds = time.perf_counter() - started
                page.screenshot(path=str(root / f"{name.replace(' ', '_')}.png"))
                print(f"  {name}: {seconds:.2f} s", file=sys.stderr, flush=True)
                loads.append({"name": name, "command": f"Chromium: {path}", "seconds": seconds, "load": load})
            browser.close()
        webserver_mb = max(
            (_peak_rss_mb(pid) or 0.0 for pid in _descendants(dev.process.pid) if _is_webserver(pid)), default=0.0
        )
        for load in loads:
            load["peak_mb"] = webserver_mb
    finally:
        dev.stop()
    return loads


def _is_webserver(pid: int) -> bool:
    try:
        return b"webserver" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def published_seconds(stdout: str) -> float:
    found = re.search(r"^published: [^(]*\(([\d.]+) s\b", stdout, re.M)
    assert found, stdout[-3000:]
    return float(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--years", type=int, default=12)
    parser.add_argument("--max-parallel", type=int, default=4)
    parser.add_argument("--no-ui", action="store_true", help="skip the pages in Chromium")
    parser.add_argument("--keep", action="store_true", help="keep the temporary instance (its path is printed)")
    parser.add_argument("--out", default=str(REPO / "bench/results/huge_asset.md"))
    args = parser.parse_args()

    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    root = Path(tempfile.mkdtemp(prefix="huge_asset_bench_"))
    env = {**os.environ, **fresh_environment(root), YEARS_ENV: str(args.years)}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "bench"), env["PYTHONPATH"]])
    days = all_days(args.years)
    first, last = str(days[0]), str(days[-1])
    whole = ["-f", DEFS, "--select", "*", "--start", first, "--end", last]
    graph = definitions(args.years).resolve_asset_graph()
    partitions = {
        key.to_user_string(): len(graph.get(key).partitions_def.get_partition_keys())
        for key in graph.get_all_asset_keys()
    }
    steps = []
    try:
        steps.append(timed("baseline: dagster asset list", [str(BIN / "dagster"), "asset", "list", "-f", DEFS], env))
        steps.append(timed("plan", backfill("plan", *whole), env))
        steps[-1]["nodes"] = planned_nodes(steps[-1]["stdout"])

        wanted = history(args.years)
        started = time.perf_counter()
        with dg.DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
            write_events(instance, wanted)
        seeded = time.perf_counter() - started
        print(f"  history: {len(wanted):,} materializations in {seeded:.0f} s", file=sys.stderr, flush=True)

        # The first reads the whole history once: it builds the provenance index and Dagster's
        # status cache of each asset (the UI's first look at the asset would build the latter).
        steps.append(timed("catch-up plan, first", backfill("plan", *whole, "--catch-up"), env))
        steps.append(timed("catch-up plan", backfill("plan", *whole, "--catch-up"), env))
        steps[-1]["nodes"] = current_nodes(steps[-1]["stdout"])
        run = timed(
            "catch-up run", backfill("run", *whole, "--catch-up", "--max-parallel", str(args.max_parallel)), env
        )
        run["nodes"] = steps[-1]["nodes"]  # the catch-up plan's: what it runs and publishes
        steps.append(run)
        backfill_id = re.search(r"^backfill ([0-9a-f]{12})", run["stdout"], re.M).group(1)
        steps.append({**run, "name": "publish", "seconds": published_seconds(run["stdout"]), "cpu": None})
        steps.append(timed("status", backfill("status", backfill_id), env))
        missing_nodes = sum(partitions.values()) - len(wanted)
        with dg.DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
            made = sum(len(instance.get_materialized_partitions(key)) for key in graph.get_all_asset_keys())
        assert made == sum(partitions.values()), f"{made:,} partitions materialized after the catch-up"
        if not args.no_ui:
            steps += page_loads(env, root, backfill_id, partitions["hours"])
    finally:
        if args.keep:
            print(f"kept: {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)
    uptime_after = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    baseline = steps[0]
    rows = []
    for step in steps:
        goal = GOALS.get(step["name"])
        verdict = "" if goal is None else f"{'met' if step['seconds'] <= goal else 'NOT met'} (<= {goal:g} s)"
        cpu = "" if step.get("cpu") is None else f"{step['cpu']:.2f}"
        ratio = "" if step.get("cpu") is None else f"{step['cpu'] / baseline['cpu']:.2f}x"
        nodes = f"{step['nodes']:,}" if "nodes" in step else ""
        rows.append(
            f"| {step['name']} | {nodes} | **{step['seconds']:.2f}** | {cpu} | {ratio} | {step['peak_mb']:,.0f} | "
            f"{step['load']:.1f} | {verdict} |"
        )
    commands = [f"- {step['name']}: `{step['command']}`" for step in steps if step["name"] != "publish"]
    lines = [
        f"# 100,000 partitions per asset: {partitions['hours']:,} hourly partitions and their daily child",
        "",
        f"Command: `python bench/huge_asset_bench.py --years {args.years} --max-parallel {args.max_parallel}"
        f"{' --no-ui' if args.no_ui else ''}` ({os.cpu_count()} cores; `uptime` before: `{uptime}`; after: "
        f"`{uptime_after}`)",
        "",
        f"- code location: bench/huge_asset_defs.py, `hours` ({partitions['hours']:,} partitions, {first} to "
        f"{last}) and `days` ({partitions['days']:,}, each reading its 24 hours); no output, no IO manager: the "
        "assets store nothing (no Delta table, no Dagster IO manager)",
        f"- history: {len(wanted):,} materializations written as Dagster events in batches through the instance "
        f"(SQLite) in {seeded:.0f} s, not timed; missing: {missing_nodes:,} nodes "
        f"({missing_nodes / sum(partitions.values()):.1%}), {len(missing_days(args.years))} days in blocks of 4",
        f"- after the catch-up run every partition of both assets is materialized ({made:,}), checked",
        "",
        "Each step a process of its own: wall and CPU seconds, its peak resident memory (the largest of the process "
        "and of those it waited for: a run's workers), the ratio of its CPU to the baseline's (Dagster loading the "
        "same code location), the 1-minute load average when it started. *publish* is the run's own publish "
        "step as it prints it. *catch-up plan, first*: the first plan on the instance, which also builds the "
        "provenance index from the event log and Dagster's status cache of each asset (as the UI's first look "
        "at the asset does); the second is what every later catch-up pays. The pages: from navigation until "
        "Chromium shows the hourly asset's partition count (targeted, on the backfill's page; materialized, on "
        "the asset's); memory: the webserver's peak.",
        "",
        "| step | nodes | wall s | CPU s | CPU ÷ baseline | peak MB | load | goal |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
        *rows,
        "",
        "Commands:",
        "",
        *commands,
    ]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
