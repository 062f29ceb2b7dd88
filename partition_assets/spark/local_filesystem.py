"""The Hadoop filesystem a local Spark server writes files with (spark/jvm/NioLocalFileSystem.java).

Without Hadoop's native library, which pyspark does not ship, Hadoop's local filesystem runs
a `chmod` process for every file and folder it creates: 88 processes for a write of 12
partitions, 14,771 over the test suite. `NioLocalFileSystem` is Hadoop's local filesystem
(checksum files included; `FileSystem.getLocal` casts to it) whose raw filesystem sets the
same permission bits through java.nio. Node-sized Delta writes (a week of daily partitions)
on a local[2] server: 1.20x faster, with 1.13x less server CPU (bench/results/storage.md);
the tests' many tiny writes gain more.

The class is in the product's jar (spark/jvm_jar.py), on every server's driver classpath.

Not guaranteed: a server on a cluster master (`spark://`, `k8s://`, `local-cluster[...]`)
keeps Hadoop's filesystem: its executors, in other JVMs, would not have the class on their
classpath. A conf that names its own `spark.hadoop.fs.file.impl` keeps it.
"""

import re
from collections.abc import Mapping

LOCAL_FILESYSTEM_CLASS = "partition_assets.hadoop.NioLocalFileSystem"
FILE_IMPL_KEY = "spark.hadoop.fs.file.impl"
# The masters whose executors run in the driver's JVM.
_IN_DRIVER_MASTER = re.compile(r"local(\[[^\]]*\])?")


def local_filesystem_conf(master: str, conf: Mapping[str, str]) -> dict[str, str]:
    """What a server on `master` with the conf `conf` adds to it, over it: the filesystem, for
    a master whose executors run in the driver; nothing for another master, or when `conf`
    names its own filesystem."""
    if not _IN_DRIVER_MASTER.fullmatch(master) or FILE_IMPL_KEY in conf:
        return {}
    return {FILE_IMPL_KEY: LOCAL_FILESYSTEM_CLASS}
