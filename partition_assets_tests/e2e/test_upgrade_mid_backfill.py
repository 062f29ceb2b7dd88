"""Upgrade mid-backfill (issue 55 part 3, docs/guide/upgrading.md): a staged backfill started
by the previous release of partition_assets (bench/soak/upgrade.py builds it from commit
DEFAULT_COMMIT, in a venv of its own, once per machine), its host lost (SIGKILL of its
process group) once some nodes succeeded, then read, resumed and published by this release,
ends as an undisturbed backfill of this release ends; and the previous release on state this
one wrote (a downgrade).

The user's project is one module, a copy of safe_defs, in a folder of its own: both releases
import it by the same name, as a deployment's code is the same code before and after an upgrade.
"""

import os
import shutil
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest

from bench.soak.upgrade import Release, kill, previous_release
from partition_assets.backfill.model import BackfillStatus
from partition_assets.spark import SparkResource
from partition_assets.state_formats import RECORD_FORMAT
from partition_assets.storage.leases import held_by
from partition_assets_tests.support.cli_runs import backfill_id, ok, runs_by_node, start_cli
from partition_assets_tests.support.instances import instance_env
from partition_assets_tests.support.lakehouse import TABLES, Lakehouse
from partition_assets_tests.support.locations import safe_defs
from partition_assets_tests.support.older_releases import stored_body
from partition_assets_tests.support.polling import wait_for
from partition_assets_tests.support.published import Published, published_by
from partition_assets_tests.support.records import recorded_backfill

pytestmark = pytest.mark.slow

MODULE = "upgrade_shop"
RUN = ["run", "-m", MODULE, "--select", "*", "--start", "2024-01-01", "--end", "2024-01-02"]
NODES = 6  # three tables, two days
SUCCEEDED_BEFORE_THE_UPGRADE = 2
REMOTE_ENV = "PARTITION_ASSETS_SPARK_REMOTE"  # a Spark server a project uses knowingly (spark/resource.py)


@pytest.fixture(scope="session")
def previous() -> Release:
    """The previous release, built once per machine (its venv cached by commit)."""
    return previous_release()


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """The user's project folder: the code location, importable by the same name by both releases."""
    folder = tmp_path_factory.mktemp("project")
    shutil.copy(safe_defs.__file__, folder / f"{MODULE}.py")
    return folder


@dataclass(frozen=True)
class Undisturbed:
    house: Lakehouse
    backfill_id: str
    published: Published


@pytest.fixture(scope="module")
def undisturbed(project, tmp_path_factory, home_template) -> Undisturbed:
    """The same backfill run to its end by this release alone, on a lakehouse of its own."""
    house = Lakehouse(tmp_path_factory.mktemp("undisturbed"), home_template)
    bid = backfill_id(ok(house.cli(*RUN, PYTHONPATH=str(project))))
    return Undisturbed(house, bid, published_by(house, bid))


def server_of_this_release(spark_resource: SparkResource) -> dict[str, str]:
    """The environment in which the previous release uses the session's Spark server, which this
    release started: it refuses, unless told so, a server another package started
    (docs/guide/upgrading.md)."""
    return {REMOTE_ENV: spark_resource.local_server().url}


def succeeded_nodes(house: Lakehouse, bid: str | None = None) -> set[tuple[str, str]]:
    """The nodes with a successful run in `house`'s instance (of backfill `bid`, when given)."""
    runs = runs_by_node(house.home, bid)
    return {node for node, statuses in runs.items() if dg.DagsterRunStatus.SUCCESS in statuses}


def test_a_backfill_the_previous_release_started_is_resumed_and_published_by_this_one_as_if_undisturbed(
    previous, project, lakehouse, undisturbed, spark_resource, tmp_path
):
    house = lakehouse
    # Nodes slow enough that the previous release's host is lost part way.
    started = previous.start(
        "backfill",
        *RUN,
        cwd=project,
        env=house.env(**{safe_defs.SLOW_ENV: "3", **server_of_this_release(spark_resource)}),
        log=tmp_path / "previous.log",
    )
    try:
        wait_for(lambda: len(succeeded_nodes(house)) >= SUCCEEDED_BEFORE_THE_UPGRADE, 300, alive=[started])
    finally:
        kill(started)
    bid = house.newest_backfill()
    before = succeeded_nodes(house)
    assert SUCCEEDED_BEFORE_THE_UPGRADE <= len(before) < NODES, (tmp_path / "previous.log").read_text()

    # This release reads the previous one's record, then finishes its backfill.
    status = ok(house.cli("status", bid, PYTHONPATH=str(project)))
    assert f"backfill {bid}" in status, status
    ok(house.cli("resume", bid, PYTHONPATH=str(project)))

    assert recorded_backfill(house.home, bid).status == BackfillStatus.PUBLISHED
    assert published_by(house, bid) == undisturbed.published  # tables, ledger, release log, materializations
    runs = runs_by_node(house.home, bid)
    assert len(runs) == NODES
    for node, statuses in runs.items():
        assert Counter(statuses)[dg.DagsterRunStatus.SUCCESS] == 1, node  # ran to success once
        if node in before:
            assert statuses == [dg.DagsterRunStatus.SUCCESS], node  # never ran again
    assert not any(held_by(house.uri(table), bid) for table in TABLES)  # no lease left


def test_the_previous_release_refuses_a_backfill_this_one_left_mid_way_naming_its_format(
    previous, project, undisturbed, spark_resource, tmp_path
):
    """A downgrade: this release's record carries where its publish is (publish_stage), which
    the previous release would ignore; it refuses the record rather than resume it."""
    house = undisturbed.house.copy_to(tmp_path / "house")
    published = house.contents()
    started = start_cli(
        "backfill",
        *RUN,
        env=house.env(**{safe_defs.SLOW_ENV: "3", safe_defs.FACTOR_ENV: "1.25", "PYTHONPATH": str(project)}),
    )
    try:
        wait_for(lambda: house.newest_backfill() != undisturbed.backfill_id, 120, alive=[started])
        bid = house.newest_backfill()
        wait_for(lambda: len(succeeded_nodes(house, bid)) >= SUCCEEDED_BEFORE_THE_UPGRADE, 300, alive=[started])
    finally:
        kill(started)
    with house.instance() as instance:
        stored = stored_body(instance, bid)
    assert stored["format"] == RECORD_FORMAT

    for command in ("status", "resume"):
        refused = previous.run(
            "backfill",
            command,
            bid,
            cwd=project,
            env=house.env(**{safe_defs.FACTOR_ENV: "1.25", **server_of_this_release(spark_resource)}),
        )
        message = " ".join((refused.stdout + refused.stderr).split())
        assert refused.returncode != 0, message
        refusal = f"the record of backfill {bid} is in format {RECORD_FORMAT}, which this release of partition_assets"
        assert f"{refusal} cannot read (it reads formats 1 to 2)" in message, message
        assert "Nothing was written." in message

    with house.instance() as instance:
        assert stored_body(instance, bid) == stored  # nothing written
    assert house.contents() == published


def test_the_previous_release_opens_an_instance_on_postgres(previous, project, postgres_server, tmp_path):
    """A deployment on Postgres (the soak's) installs the package with its `postgres` extra:
    the previous release, as built, opens that instance (without `dagster-postgres`, it could
    not load the instance's storage, and the soak's backfill never started)."""
    env = instance_env(tmp_path / "home", postgres_server.create_database())
    listed = previous.run("backfill", "list", cwd=project, env={**os.environ, **env})
    assert listed.returncode == 0, listed.stdout + listed.stderr
