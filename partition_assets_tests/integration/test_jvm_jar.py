"""The local Spark server writes files without a process per file (spark/local_filesystem.py),
and the product's committed jar is what its sources compile to."""

import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pyspark

from partition_assets.spark.jvm_jar import JAR, JVM_DIR
from partition_assets.spark.local_filesystem import LOCAL_FILESYSTEM_CLASS
from partition_assets.spark.scheduler_pools import PREEMPTING_LISTENER


def test_the_committed_jar_holds_what_its_sources_compile_to(tmp_path):
    javac = shutil.which("javac")
    assert javac, "javac (a JDK 17) is needed to check the jar against its sources"
    jars = Path(pyspark.__file__).parent / "jars"
    subprocess.run(
        [javac, "--release", "17", "-cp", f"{jars}/*", "-d", str(tmp_path), *map(str, JVM_DIR.glob("*.java"))],
        check=True,
    )
    compiled = {path.relative_to(tmp_path).as_posix(): path.read_bytes() for path in tmp_path.rglob("*.class")}
    with zipfile.ZipFile(JAR) as jar:
        committed = {name: jar.read(name) for name in jar.namelist() if name.endswith(".class")}
    for class_name in (LOCAL_FILESYSTEM_CLASS, PREEMPTING_LISTENER):
        assert class_name.replace(".", "/") + ".class" in compiled
    assert committed == compiled, "run `make jvm-jar`"


def _children_minor_faults(pid: int) -> int:
    """The minor page faults of `pid`'s children it has waited for: each process the JVM
    starts and reaps (Hadoop's chmod) adds a hundred or more; nothing else does."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[8])  # cminflt: field 11 of stat(5), the 9th after the command name


def test_a_partitioned_write_starts_no_process_and_sets_hadoops_modes(spark, spark_resource, tmp_path):
    server_pid = spark_resource.local_server().recorded_server().pid
    frame = spark.range(60).selectExpr("id", "cast(id % 3 as string) as region", "cast(id % 4 as string) as day")
    before = _children_minor_faults(server_pid)
    frame.write.partitionBy("day", "region").parquet(str(tmp_path / "table"))
    assert _children_minor_faults(server_pid) == before, "the server started processes (Hadoop's chmod) to write"
    written = [Path(root) / name for root, _, names in os.walk(tmp_path / "table") for name in names]
    assert sorted(
        {path.parent.relative_to(tmp_path / "table").as_posix() for path in written if path.suffix == ".parquet"}
    ) == [f"day={day}/region={region}" for day in "0123" for region in "012"]
    # Hadoop's default umask (022) on its default file mode (0666), as its chmod set them.
    assert {path.stat().st_mode & 0o777 for path in written} == {0o644}
    assert spark.read.parquet(str(tmp_path / "table")).count() == 60
