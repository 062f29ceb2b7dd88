"""Unit tests: logic and fakes in this process, the fast loop (`make test-unit`).

Contract: a unit test that starts a process (subprocess, multiprocessing, a fork server,
os.fork or a spawn) or a Spark session fails, naming what it started: that test belongs in
partition_assets_tests/integration or partition_assets_tests/e2e. Each start is refused with an
error where it is made, and the test fails at teardown even when the code under test caught
that error.
Not guaranteed: starts through C extensions that fork without Python (none is known here).
"""

import multiprocessing.process
import multiprocessing.util
import os
import subprocess

import pytest
from pyspark.sql import SparkSession

from partition_assets.deploy import versioning

# The commit a unit test's code location is stamped with: reading the real one runs git, a
# process (and git_sha's cache made that depend on which test loaded a location first).
UNIT_TEST_SHA = "0000000unit"


class StartRefused(RuntimeError):
    """A unit test tried to start a process or a Spark session."""


@pytest.fixture(autouse=True)
def no_process_and_no_spark(monkeypatch):
    """The guard; yields what it refused so far (a test of the guard clears it)."""
    refused: list[str] = []

    def refuse(what: str):
        def start(*args, **kwargs):
            refused.append(f"{what}{args[:1]}")
            raise StartRefused(
                f"a unit test started {what}{args[:1]}: "
                "move it to partition_assets_tests/integration or partition_assets_tests/e2e"
            )

        return start

    monkeypatch.setattr(subprocess, "Popen", refuse("subprocess.Popen"))
    for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system", "spawnv", "spawnve"):
        monkeypatch.setattr(os, name, refuse(f"os.{name}"))
    # Every multiprocessing process (pools' workers too), and the fork server it may start first.
    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", refuse("a multiprocessing process"))
    monkeypatch.setattr(multiprocessing.util, "spawnv_passfds", refuse("a fork server"))
    # Local and Spark Connect sessions alike are built here.
    monkeypatch.setattr(SparkSession.Builder, "getOrCreate", refuse("a Spark session"))
    monkeypatch.setattr(SparkSession.Builder, "create", refuse("a Spark session"))
    monkeypatch.setattr(versioning, "git_sha", lambda path: UNIT_TEST_SHA)
    yield refused
    assert not refused, (
        f"a unit test started {refused}: move it to partition_assets_tests/integration or partition_assets_tests/e2e"
    )


@pytest.fixture(scope="session")
def spark_resource():
    """Unit tests run without Spark (the session's server is started before any test's guard)."""
    pytest.fail(
        "a unit test asked for Spark: move it to partition_assets_tests/integration or partition_assets_tests/e2e"
    )


@pytest.fixture(scope="session")
def postgres_server():
    """Unit tests start no server."""
    pytest.fail("a unit test asked for PostgreSQL: move it to partition_assets_tests/e2e")
