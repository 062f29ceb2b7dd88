"""Storage benchmarks, each against a baseline measured in the same run.

1. Write throughput: a partition-scoped Delta write (stage, validate, publish,
   commit) against Spark writing the same DataFrame as plain partitioned Parquet.
2. Publish time (staged files moved into the layout, then one commit) against
   the number of files committed.
3. Files opened by a partition-pruned read against all files of the table.
4. Node-sized writes (a week of daily partitions) on a local server writing through this
   library's Hadoop filesystem (spark/local_filesystem.py) against one writing through
   Hadoop's own, which starts a chmod process per file and folder.

Usage: python bench/storage_bench.py [--rows N] [--repeats K] [--out bench/results/storage.md]
"""

import argparse
import os
import shutil
import statistics
import tempfile
import time
from functools import partial
from pathlib import Path

from dagster_backfill import free_port
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from partition_assets.partitions import daily
from partition_assets.spark import SparkResource
from partition_assets.spark.connect_server import LocalConnectServer
from partition_assets.spark.local_filesystem import FILE_IMPL_KEY
from partition_assets.storage import DeltaFormat, PartitionScope, replace_partitions
from partition_assets.storage.write_staging import stage_dataframe

REPO = Path(__file__).resolve().parents[1]
DAYS = [f"2024-01-{d:02d}" for d in range(1, 11)]
DAILY = daily("2024-01-01")


def frame(spark: SparkSession, rows: int, days: list[str], files_per_day: int = 2) -> DataFrame:
    day = F.element_at(F.array(*[F.lit(d) for d in days]), (F.col("id") % len(days) + 1).cast("int"))
    return (
        spark.range(rows)
        .select(
            F.col("id"),
            (F.col("id") * 7 % 1000).alias("customer"),
            (F.rand(seed=1) * 100).alias("amount"),
            F.sha1(F.col("id").cast("string")).alias("payload"),
            day.alias("ds"),
        )
        .repartition(len(days) * files_per_day, "ds")
    )


def timed(action) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def write_throughput(spark: SparkSession, rows: int, repeats: int, work: Path) -> dict:
    scope = PartitionScope.for_keys(DAILY, DAYS, ("ds",))
    data = frame(spark, rows, DAYS)
    raw, ours = [], []

    def raw_write():
        data.write.mode("overwrite").partitionBy("ds").parquet(str(work / "raw"))

    def delta_write():
        DeltaFormat().write(data, str(work / "delta"), scope)

    raw_write()  # warm-up: JIT, caches
    for _ in range(repeats):  # interleaved, so drift hits both alike
        raw.append(timed(raw_write))
        ours.append(timed(delta_write))
    return {"raw": raw, "ours": ours, "ratio": statistics.median(raw) / statistics.median(ours)}


def commit_times(spark: SparkSession, work: Path) -> list[tuple[int, float]]:
    results = []
    for files in (10, 100, 1000):
        uri = str(work / f"commit_{files}")
        scope = PartitionScope.for_keys(DAILY, DAYS[:1], ("ds",))
        data = spark.range(files * 10).select("id", F.lit(DAYS[0]).alias("ds")).repartition(files)
        seconds = []
        for _ in range(2):  # the second commit also removes the first one's files
            staged = stage_dataframe(data, uri, scope)
            seconds.append(timed(lambda staged=staged, scope=scope: replace_partitions(staged, scope)))
        results.append((files, statistics.median(seconds)))
    return results


def pruned_read(spark: SparkSession, work: Path) -> tuple[int, int]:
    uri = str(work / "pruned")
    days = DAILY.get_partition_keys()[:30]
    scope = PartitionScope.for_keys(DAILY, days, ("ds",))
    DeltaFormat().write(frame(spark, 300_000, days, files_per_day=3), uri, scope)
    one_day = PartitionScope.for_keys(DAILY, days[7:8], ("ds",))
    opened = DeltaFormat().read(spark, uri, one_day).inputFiles()
    everything = DeltaFormat().read(spark, uri, None).inputFiles()
    return len(opened), len(everything)


def _server_seconds(pid: int) -> float:
    """CPU seconds of the server process and of the children it reaped (Hadoop's chmod)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(value) for value in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _write_week(data: DataFrame, folder: Path, scope: PartitionScope, writes: int) -> None:
    for table in range(writes):
        DeltaFormat().write(data, str(folder / str(table)), scope)


def node_sized_writes(writes: int, repeats: int, work: Path) -> dict[str, dict[str, list[float]]]:
    """`writes` Delta writes of a week of daily partitions (2 files each), per repeat, on two
    fresh local servers: Hadoop's local filesystem (the baseline) and this library's; the
    repeats interleaved, so that drift hits both alike. Wall seconds and server CPU seconds."""
    week = DAYS[:7]
    scope = PartitionScope.for_keys(DAILY, week, ("ds",))
    servers = {
        "hadoop": LocalConnectServer(port=free_port(), conf={FILE_IMPL_KEY: "org.apache.hadoop.fs.LocalFileSystem"}),
        "ours": LocalConnectServer(port=free_port()),
    }
    results: dict[str, dict[str, list[float]]] = {name: {"wall": [], "cpu": []} for name in servers}
    try:
        sessions = {
            name: SparkSession.builder.remote(server.ensure_running()).create() for name, server in servers.items()
        }
        pids = {name: server.recorded_server().pid for name, server in servers.items()}
        for name, session in sessions.items():  # warm-up: JIT, caches
            _write_week(frame(session, 7_000, week), work / f"warm_{name}", scope, 1)
        for repeat in range(repeats):
            for name, session in sessions.items():
                data = frame(session, 7_000, week)
                cpu_before = _server_seconds(pids[name])
                results[name]["wall"].append(
                    timed(partial(_write_week, data, work / f"{name}_{repeat}", scope, writes))
                )
                results[name]["cpu"].append(_server_seconds(pids[name]) - cpu_before)
        for session in sessions.values():
            session.stop()
    finally:
        for server in servers.values():
            server.stop()
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=4_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--writes", type=int, default=10, help="node-sized writes per repeat and server")
    parser.add_argument("--out", default=str(REPO / "bench/results/storage.md"))
    args = parser.parse_args()

    spark = SparkResource.from_env().spark_session
    work = Path(tempfile.mkdtemp(prefix="partition-assets-bench-"))
    try:
        throughput = write_throughput(spark, args.rows, args.repeats, work)
        commits = commit_times(spark, work)
        opened, total = pruned_read(spark, work)
        node_writes = node_sized_writes(args.writes, args.repeats, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    seconds = lambda values: ", ".join(f"{v:.2f}" for v in values)  # noqa: E731
    lines = [
        "# Storage benchmark",
        "",
        f"Command: `python bench/storage_bench.py --rows {args.rows} --repeats {args.repeats} --writes {args.writes}` "
        "(2 cores, Spark local[2] behind the shared Spark Connect server)",
        "",
        f"## Write throughput: {args.rows:,} rows in 10 daily partitions",
        "",
        "| write | median s | runs (s) |",
        "| --- | --- | --- |",
        f"| Spark, plain partitioned Parquet (baseline) | {statistics.median(throughput['raw']):.2f} "
        f"| {seconds(throughput['raw'])} |",
        f"| partition_assets Delta write (stage, validate, publish, commit) "
        f"| {statistics.median(throughput['ours']):.2f} | {seconds(throughput['ours'])} |",
        "",
        f"Throughput ratio (ours / baseline): **{throughput['ratio']:.2f}** (goal >= 0.85)",
        "",
        "## Publish time (move staged files into the layout + commit) against files committed "
        "(one partition, replacing its previous files)",
        "",
        "| files | publish s |",
        "| --- | --- |",
        *(f"| {files} | {secs:.3f} |" for files, secs in commits),
        "",
        "## Partition-pruned read",
        "",
        f"Reading 1 of 30 daily partitions opened {opened} of the table's {total} files.",
        "",
        f"## Node-sized writes: {args.writes} Delta writes of 7 daily partitions (7,000 rows, 2 files a day) per run",
        "",
        "Two fresh local[2] servers, the runs interleaved: one on Hadoop's local filesystem (baseline: a chmod "
        "process per file and folder it creates), one on this library's (permissions through java.nio).",
        "",
        "| server's filesystem | median s | runs (s) | median server CPU s | runs (CPU s) |",
        "| --- | --- | --- | --- | --- |",
        *(
            f"| {label} | {statistics.median(node_writes[name]['wall']):.2f} | {seconds(node_writes[name]['wall'])} "
            f"| {statistics.median(node_writes[name]['cpu']):.2f} | {seconds(node_writes[name]['cpu'])} |"
            for name, label in (("hadoop", "Hadoop's LocalFileSystem (baseline)"), ("ours", "NioLocalFileSystem"))
        ),
        "",
        "Speed-up (baseline / ours): **"
        f"{statistics.median(node_writes['hadoop']['wall']) / statistics.median(node_writes['ours']['wall']):.2f}x** "
        "wall, **"
        f"{statistics.median(node_writes['hadoop']['cpu']) / statistics.median(node_writes['ours']['cpu']):.2f}x** "
        "server CPU",
    ]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
