"""A lakehouse for end-to-end tests of staged backfills: a Dagster home, a lake and the
notification events of the safe-backfill code location (safe_defs.py), with
`partition-assets backfill` run against them, and fixtures of published days to copy."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest
from deltalake import DeltaTable

from partition_assets.storage.failpoints import ENV as FAILPOINT_ENV
from partition_assets_tests import safe_defs
from partition_assets_tests.cli_runs import ok
from partition_assets_tests.readers import delta_row_set

REPO = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "partition_assets", "backfill"]
TARGET = ["-m", "partition_assets_tests.safe_defs"]
TABLES = ("orders", "revenue", "revenue_report")


class Lakehouse:
    """A Dagster home, a lake and an events file, with the CLI run against them."""

    def __init__(self, root: Path) -> None:
        self.home = root / "dagster_home"
        self.home.mkdir()
        shutil.copy(REPO / "dagster.yaml", self.home / "dagster.yaml")
        self.lake = root / "lake"
        self.events_file = root / "events.jsonl"

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != FAILPOINT_ENV}
        return {
            **env,
            "DAGSTER_HOME": str(self.home),
            safe_defs.LAKE_ENV: str(self.lake),
            safe_defs.EVENTS_ENV: str(self.events_file),
            **extra,
        }

    def cli(self, *args: str, **env: str) -> subprocess.CompletedProcess:
        return subprocess.run([*CLI, *args], cwd=REPO, env=self.env(**env), capture_output=True, text=True, timeout=600)

    def start(self, *args: str, **env: str) -> subprocess.Popen:
        return subprocess.Popen(
            [*CLI, *args],
            cwd=REPO,
            env=self.env(**env),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )

    def backfill(self, first: str, last: str, *extra: str, **env: str) -> subprocess.CompletedProcess:
        return self.cli(*backfill_args(first, last, *extra), **env)

    def start_backfill(self, first: str, last: str, *extra: str, **env: str) -> subprocess.Popen:
        return self.start(*backfill_args(first, last, *extra), **env)

    def uri(self, table: str) -> str:
        return str(self.lake / table)

    def content(self, table: str) -> frozenset:
        if not DeltaTable.is_deltatable(self.uri(table)):
            return frozenset()
        return delta_row_set(self.uri(table))

    def contents(self) -> dict[str, frozenset]:
        return {table: self.content(table) for table in TABLES}

    def versions(self) -> dict[str, int]:
        return {table: DeltaTable(self.uri(table)).version() for table in TABLES}

    def events(self) -> list[str]:
        if not self.events_file.exists():
            return []
        return [json.loads(line)["kind"] for line in self.events_file.read_text().splitlines()]

    def instance(self) -> dg.DagsterInstance:
        return dg.DagsterInstance.from_config(str(self.home))

    def copy_to(self, root: Path) -> "Lakehouse":
        """A copy of this lakehouse's home, lake and events under `root`, to change on its own."""
        copy = Lakehouse(root)
        shutil.copytree(self.home, copy.home, dirs_exist_ok=True)
        shutil.copytree(self.lake, copy.lake)
        shutil.copy(self.events_file, copy.events_file)
        return copy


def backfill_args(first: str, last: str, *extra: str) -> list[str]:
    """`backfill run` of every asset of the test code location over first..last."""
    return ["run", *TARGET, "--select", "*", "--start", first, "--end", last, *extra]


@pytest.fixture
def lakehouse(tmp_path) -> Lakehouse:
    return Lakehouse(tmp_path)


def published_from_january_1(root: Path, last: str) -> Lakehouse:
    """A lakehouse under `root` whose January 1..`last` are backfilled and published per node."""
    base = Lakehouse(root)
    ok(base.backfill("2024-01-01", last, "--publish", "per-node"))
    return base


@pytest.fixture(scope="module")
def two_days_published(tmp_path_factory) -> Lakehouse:
    """January 1-2 published, once for the module: the tests copy it."""
    return published_from_january_1(tmp_path_factory.mktemp("two_days_published"), "2024-01-02")


@pytest.fixture(scope="module")
def three_days_published(tmp_path_factory) -> Lakehouse:
    """January 1-3 published, once for the module: the tests copy it."""
    return published_from_january_1(tmp_path_factory.mktemp("three_days_published"), "2024-01-03")


@pytest.fixture
def published_2_days(two_days_published, tmp_path) -> Lakehouse:
    """A copy of two_days_published for one test to change (the state every test reached by
    backfilling those days itself)."""
    return two_days_published.copy_to(tmp_path)


@pytest.fixture
def published_3_days(three_days_published, tmp_path) -> Lakehouse:
    """A copy of three_days_published for one test to change."""
    return three_days_published.copy_to(tmp_path)


def expected_orders(days: list[str], factor: float) -> frozenset:
    rows = set()
    for day in days:
        for i in range(safe_defs.ORDERS_PER_DAY):
            rows.add(tuple(sorted({"order_id": f"{day}-{i}", "amount": (i + 1) * factor, "ds": day}.items())))
    return frozenset(rows)


def days(first: int, last: int) -> list[str]:
    return [f"2024-01-{day:02d}" for day in range(first, last + 1)]
