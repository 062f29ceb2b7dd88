"""What the release log (storage/release_log.py) costs, at 14 and 500 tables: the publish's
added time (its `begin` and `release` records) and a reader's added latency per run (reading
the log and each table's safe version, over opening each table's latest version as a reader
does anyway), with a log already holding 100 releases.

Each size runs on a fresh local lake of tiny Delta tables written by delta-rs; no Spark.

Usage: python bench/release_bench.py [--tables 14 500] [--releases 100]
       (prints a Markdown table)

Not guaranteed: figures on a shared machine vary with its load; object stores add a round
trip per read that a local disk does not.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

# This checkout's package, even when the installed package is another work tree's.
sys.path[:0] = [str(Path(__file__).resolve().parents[1])]

from partition_assets.storage.release_log import append_release, begin_release
from partition_assets.storage.release_reads import pinned_versions


def timed(action: Callable[[], object], repeat: int = 3) -> float:
    """The median wall time of `action`, in seconds."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def measure(tables: int, releases: int) -> dict[str, float]:
    root = tempfile.mkdtemp(prefix="release_bench_")
    uris = [f"{root}/t{index:03d}" for index in range(tables)]
    for uri in uris:
        write_deltalake(uri, pa.table({"ds": ["2024-01-01"], "amount": [1]}))
    names = [Path(uri).name for uri in uris]
    for index in range(releases):  # a log with history: each release names two tables
        pair = uris[index % tables], uris[(index + 1) % tables]
        append_release(root, "publish", f"bf{index}", dict.fromkeys(pair, 0))

    def publish_records() -> None:
        begin_release(root, "publish", "bench", uris)
        append_release(root, "publish", "bench", dict.fromkeys(uris, 0))

    return {
        "publish_added_s": timed(publish_records),
        "latest_versions_s": timed(lambda: [DeltaTable(uri).version() for uri in uris]),
        "release_versions_s": timed(lambda: pinned_versions(root, names)),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tables", type=int, nargs="+", default=[14, 500])
    parser.add_argument("--releases", type=int, default=100)
    args = parser.parse_args()
    print("| tables | publish: added time (2 records) | reader: latest versions | reader: release versions | added |")
    print("|---:|---:|---:|---:|---:|")
    for tables in args.tables:
        m = measure(tables, args.releases)
        added = m["release_versions_s"] - m["latest_versions_s"]
        print(
            f"| {tables} | {m['publish_added_s'] * 1000:.0f} ms | {m['latest_versions_s'] * 1000:.0f} ms "
            f"| {m['release_versions_s'] * 1000:.0f} ms | {added * 1000:.0f} ms |"
        )


if __name__ == "__main__":
    main()
