"""Which local Spark servers write with the chmod-free Hadoop filesystem, and how it joins
their conf (the filesystem itself: partition_assets_tests/integration/test_local_filesystem.py)."""

import os

import pytest

from partition_assets.spark.local_filesystem import (
    FILE_IMPL_KEY,
    LOCAL_FILESYSTEM_CLASS,
    LOCAL_FILESYSTEM_JAR,
    local_filesystem_conf,
)


@pytest.mark.parametrize("master", ["local", "local[2]", "local[*]"])
def test_a_master_running_executors_in_the_driver_gets_the_filesystem_and_its_jar(master):
    assert local_filesystem_conf(master, {}) == {
        FILE_IMPL_KEY: LOCAL_FILESYSTEM_CLASS,
        "spark.driver.extraClassPath": str(LOCAL_FILESYSTEM_JAR),
    }
    assert LOCAL_FILESYSTEM_JAR.is_file()


@pytest.mark.parametrize("master", ["spark://127.0.0.1:7077", "local-cluster[2,1,1024]", "k8s://https://k8s:443"])
def test_a_master_with_executors_in_other_jvms_keeps_hadoops_filesystem(master):
    assert local_filesystem_conf(master, {}) == {}


def test_a_conf_naming_its_own_filesystem_keeps_it_and_a_conf_classpath_follows_the_jar():
    assert local_filesystem_conf("local[2]", {FILE_IMPL_KEY: "org.apache.hadoop.fs.LocalFileSystem"}) == {}
    joined = local_filesystem_conf("local[2]", {"spark.driver.extraClassPath": "/opt/jars/a.jar"})
    assert joined["spark.driver.extraClassPath"] == os.pathsep.join([str(LOCAL_FILESYSTEM_JAR), "/opt/jars/a.jar"])
