"""A lakehouse for end-to-end tests of staged backfills: a Dagster home, a lake and the
notification events of the safe-backfill code location (safe_defs.py), with
`partition-assets backfill` run against them, the engine's coordinator job executed (or
re-executed) against them, and writes made outside any backfill (a production run, a
delta-rs commit); and lakehouses with published days (the e2e conftest's fixtures copy
them for each test).

Not guaranteed: a copy's files keep their times (shutil.copytree copies them, a vacuum test
backdates its own).
"""

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import dagster as dg
from deltalake import DeltaTable

from partition_assets.storage.failpoints import ENV as FAILPOINT_ENV
from partition_assets_tests.support import REPO
from partition_assets_tests.support.cli_runs import run_cli, start_cli
from partition_assets_tests.support.instances import instance_env
from partition_assets_tests.support.locations import safe_defs
from partition_assets_tests.support.polling import wait_for
from partition_assets_tests.support.readers import delta_row_set
from partition_assets_tests.support.records import recorded_ids

TARGET = ["-m", "partition_assets_tests.support.locations.safe_defs"]
TABLES = ("orders", "revenue", "revenue_report")
# A numeric column of each table, for a commit outside the backfill to change.
NUMBERS = {"orders": "amount", "revenue": "revenue", "revenue_report": "average_order"}

# The engine job of safe_defs over January 1-2 (argv[1]: more of its config, as JSON), under
# the backfill id launchpad0run; or, given a run id (argv[2]), that run re-executed.
RUN_COORDINATOR_JOB = """
import json
import sys
import dagster as dg
from partition_assets.backfill.planning.run_config import backfill_run_config
from partition_assets_tests.support.locations.safe_defs import backfill_job

config, parent_id = json.loads(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else None
with dg.DagsterInstance.get() as instance:
    if parent_id:  # as the webserver re-executes a run: its config and its (user) tags again
        parent = instance.get_run_by_id(parent_id)
        run_config, tags = parent.run_config, {k: v for k, v in parent.tags.items() if not k.startswith("dagster/")}
    else:
        run_config = backfill_run_config(selection="*", start="2024-01-01", end="2024-01-02", **config)
        tags = {"partition_assets/backfill_id": "launchpad0run"}
    result = dg.execute_job(
        dg.reconstructable(backfill_job),
        instance,
        run_config=run_config,
        tags=tags,
        reexecution_options=dg.ReexecutionOptions(parent_run_id=parent_id) if parent_id else None,
    )
    print(result.run_id)
"""


class Lakehouse:
    """A Dagster home, a lake and an events file, with the CLI run against them."""

    def __init__(
        self,
        root: Path,
        home_template: Path | None = None,
        postgres_url: str | None = None,
        shares: "Lakehouse | None" = None,
    ) -> None:
        """A lakehouse under `root`; its home a copy of `home_template` (a DAGSTER_HOME whose
        storage exists: a fresh one takes seconds to create), or new; on the Postgres
        database `postgres_url` when given. One that `shares` another is another host of
        it: a home of its own, the other's lake and events file."""
        self.home = root / "dagster_home"
        if home_template is not None:
            shutil.copytree(home_template, self.home)
        self._instance_env = instance_env(self.home, postgres_url)
        self.lake = shares.lake if shares else root / "lake"
        self.events_file = shares.events_file if shares else root / "events.jsonl"

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != FAILPOINT_ENV}
        return {
            **env,
            **self._instance_env,
            safe_defs.LAKE_ENV: str(self.lake),
            safe_defs.EVENTS_ENV: str(self.events_file),
            **extra,
        }

    def cli(self, *args: str, **env: str) -> subprocess.CompletedProcess:
        """`partition-assets backfill <args>` against this lakehouse, `env` added to its environment."""
        return run_cli("backfill", *args, env=self.env(**env))

    def start(self, *args: str, **env: str) -> subprocess.Popen:
        """`cli`, started in a session of its own; its output readable from pipes."""
        return start_cli("backfill", *args, env=self.env(**env), stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def backfill(self, first: str, last: str, *extra: str, **env: str) -> subprocess.CompletedProcess:
        return self.cli(*backfill_args(first, last, *extra), **env)

    def start_backfill(self, first: str, last: str, *extra: str, **env: str) -> subprocess.Popen:
        return self.start(*backfill_args(first, last, *extra), **env)

    def uri(self, table: str) -> str:
        return str(self.lake / table)

    def production_write(self, day: str) -> dg.ExecuteInProcessResult:
        """A Dagster run of `orders` for `day` outside any backfill, as a schedule's would be;
        its failure is in the result (this process needs the test session's Spark server)."""
        with self.instance() as instance:
            return dg.materialize(
                [safe_defs.orders],
                partition_key=day,
                instance=instance,
                resources={
                    "spark": safe_defs.spark,
                    "io_manager": safe_defs.SparkDeltaIOManager(root_uri=str(self.lake), spark=safe_defs.spark),
                },
                raise_on_error=False,
            )

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
        """This home's instance (on Postgres, this process's environment must name its URL)."""
        return dg.DagsterInstance.from_config(str(self.home))

    def newest_backfill(self) -> str:
        """The id of the backfill recorded last: the one a test started (a copy's are older)."""
        return recorded_ids(self.home)[-1]

    def wait_until_a_node_runs(self) -> None:
        """Returns once a run of the instance has started (and not ended yet)."""
        with self.instance() as instance:
            wait_for(lambda: instance.get_runs(dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED])), 120)

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


def expected_orders(days: list[str], factor: float) -> frozenset:
    rows = set()
    for day in days:
        for i in range(safe_defs.ORDERS_PER_DAY):
            rows.add(tuple(sorted({"order_id": f"{day}-{i}", "amount": (i + 1) * factor, "ds": day}.items())))
    return frozenset(rows)


def days(first: int, last: int) -> list[str]:
    return [f"2024-01-{day:02d}" for day in range(first, last + 1)]


def foreign_update(lakehouse: Lakehouse, table: str, day: str) -> None:
    """A commit outside the backfill, as the audit made it: a delta-rs update of one partition."""
    column = NUMBERS[table]
    DeltaTable(lakehouse.uri(table)).update(updates={column: f"{column} + 1000"}, predicate=f"ds = '{day}'")


def run_coordinator_job(
    lakehouse: Lakehouse, *parent: str, config: Mapping[str, object] | None = None, **env: str
) -> subprocess.CompletedProcess:
    """The engine job of safe_defs executed in a fresh process (as a run worker would), with
    `config` added to its run config; or, given the id of one of its runs, that run re-executed."""
    return subprocess.run(
        [sys.executable, "-c", RUN_COORDINATOR_JOB, json.dumps(dict(config or {})), *parent],
        cwd=REPO,
        env=lakehouse.env(**env),
        capture_output=True,
        text=True,
        timeout=600,
    )
