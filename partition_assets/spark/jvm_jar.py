"""The product's own JVM classes (spark/jvm/*.java), in the jar the Spark server's driver
loads: its local filesystem (spark/local_filesystem.py) and the listener by which production's
jobs preempt a backfill's tasks (spark/scheduler_pools.py).

The jar is committed, built from its sources by `make jvm-jar`: the server runs it with a Java
runtime alone.

Not guaranteed: executors in other JVMs (a cluster's) do not load it; only the driver's classes
(the listener) work there.
"""

import os
from collections.abc import Mapping
from pathlib import Path

JVM_DIR = Path(__file__).parent / "jvm"
JAR = JVM_DIR / "partition-assets.jar"
DRIVER_CLASSPATH_KEY = "spark.driver.extraClassPath"


def driver_classpath_conf(conf: Mapping[str, str]) -> dict[str, str]:
    """The driver classpath of a server whose conf is `conf`: the jar ahead of the conf's own."""
    return {DRIVER_CLASSPATH_KEY: os.pathsep.join([str(JAR), *filter(None, [conf.get(DRIVER_CLASSPATH_KEY)])])}
