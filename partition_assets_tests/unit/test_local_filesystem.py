"""Which local Spark servers write with the chmod-free Hadoop filesystem, and how the product's
jar joins their conf (the filesystem itself: partition_assets_tests/integration/test_jvm_jar.py)."""

import os

import pytest

from partition_assets.spark.jvm_jar import DRIVER_CLASSPATH_KEY, JAR, driver_classpath_conf
from partition_assets.spark.local_filesystem import FILE_IMPL_KEY, LOCAL_FILESYSTEM_CLASS, local_filesystem_conf


@pytest.mark.parametrize("master", ["local", "local[2]", "local[*]"])
def test_a_master_running_executors_in_the_driver_gets_the_filesystem(master):
    assert local_filesystem_conf(master, {}) == {FILE_IMPL_KEY: LOCAL_FILESYSTEM_CLASS}


@pytest.mark.parametrize("master", ["spark://127.0.0.1:7077", "local-cluster[2,1,1024]", "k8s://https://k8s:443"])
def test_a_master_with_executors_in_other_jvms_keeps_hadoops_filesystem(master):
    assert local_filesystem_conf(master, {}) == {}


def test_a_conf_naming_its_own_filesystem_keeps_it():
    assert local_filesystem_conf("local[2]", {FILE_IMPL_KEY: "org.apache.hadoop.fs.LocalFileSystem"}) == {}


def test_the_jar_leads_the_driver_classpath_and_a_conf_classpath_follows_it():
    assert JAR.is_file()
    assert driver_classpath_conf({}) == {DRIVER_CLASSPATH_KEY: str(JAR)}
    joined = driver_classpath_conf({DRIVER_CLASSPATH_KEY: "/opt/jars/a.jar"})
    assert joined == {DRIVER_CLASSPATH_KEY: os.pathsep.join([str(JAR), "/opt/jars/a.jar"])}
