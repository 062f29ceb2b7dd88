"""One release across tables (issue 42): while a staged backfill's publish is held between its
two table commits, or stopped part-way by a foreign commit, a reader through the library
(`read_tables`, the IO manager's inputs) joins both tables as before or both as after; a
raw delta-rs reader of the latest versions sees the mix (so this test can fail).

One backfill of partition_assets_tests/support/locations/release_defs.py runs through the real
coordinator, workers, Spark and instance, its publish held by the failpoint
`between_table_commits:hold=<file>` while a thread reads in a loop, runs a downstream
asset, and makes a foreign commit that stops the publish part-way.
"""

import importlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg
from deltalake import DeltaTable

from partition_assets.backfill.commands.recorded import publish_backfill
from partition_assets.backfill.dagster_ui.view import WEBSERVER
from partition_assets.backfill.planning.instance_state import graph_of
from partition_assets.backfill.planning.spec import BackfillSpec
from partition_assets.backfill.running.coordinator import BackfillRun
from partition_assets.backfill.state.record import BackfillRecord
from partition_assets.backfill.state.store import BackfillStore
from partition_assets.errors import PartiallyPublishedError
from partition_assets.run_tags import RELEASE_PIN_TAG
from partition_assets.storage.failpoints import ENV as FAILPOINT_ENV
from partition_assets.storage.io_manager import INPUT_VERSIONS_METADATA
from partition_assets.storage.release_log import release_log_uri
from partition_assets.storage.release_reads import pinned_versions, read_tables
from partition_assets_tests.support.polling import wait_for

CODE_LOCATION = "partition_assets_tests.support.locations.release_defs"  # imported once its lake is in the environment
LAKE_ENV = "PARTITION_ASSETS_TEST_LAKE"
TABLES = ("payouts_daily", "payouts_quarterly")
DAY = "2024-01-01"


def tag_of(rows) -> str:
    [tag] = set(rows.column("tag").to_pylist())
    return tag


def through_library(lake: Path) -> tuple[str, ...]:
    frames = read_tables(str(lake), TABLES)
    return tuple(tag_of(frames[name]) for name in TABLES)


def raw_latest(lake: Path) -> tuple[str, ...]:
    """The tables' latest versions, as any delta-rs reader opens them."""
    tables = [DeltaTable(str(lake / name)).to_pyarrow_dataset().to_table(use_threads=False) for name in TABLES]
    return tuple(tag_of(table) for table in tables)


@dataclass
class Observed:
    """What the readers saw, in a loop, while a publish was held."""

    library: list[tuple[str, ...]] = field(default_factory=list)
    raw: list[tuple[str, ...]] = field(default_factory=list)
    during: object = None
    error: BaseException | None = None


def observe(
    lake: Path, hold: Path, during: Callable[[], object], mixed: tuple[str, ...], then: Callable[[], None]
) -> tuple[threading.Thread, Observed]:
    """A thread that, once the publish is held, runs `during`, then reads through the library and
    raw in a loop until the raw reader saw `mixed` and the library reader read a few times, runs
    `then`, and lets the publish go on."""
    seen = Observed()

    def loop() -> None:
        try:
            wait_for(Path(f"{hold}.held").exists, timeout=300)
            seen.during = during()
            while mixed not in seen.raw or len(seen.library) < 3:
                seen.library.append(through_library(lake))
                seen.raw.append(raw_latest(lake))
            then()
        except BaseException as error:  # the main thread asserts on it
            seen.error = error
        finally:
            hold.touch()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    return thread, seen


def run_backfill(instance: dg.DagsterInstance) -> str:
    spec = BackfillSpec(
        module=CODE_LOCATION, selection="key:payouts_daily or key:payouts_quarterly", start=DAY, end=DAY
    )
    record = BackfillRecord(spec, store=BackfillStore(instance))
    try:
        BackfillRun(instance, record, graph_of(spec, instance), set(), dagster_view=WEBSERVER).run()
    except PartiallyPublishedError:
        pass  # the caller checks what it left
    return record.id


def test_library_readers_join_one_release_while_a_publish_is_held_or_stopped(
    spark_resource, home, lake, monkeypatch, tmp_path
):
    monkeypatch.setenv(LAKE_ENV, str(lake))
    defs_module = importlib.import_module(CODE_LOCATION)
    assert defs_module.lake == str(lake)
    tag = lake / defs_module.TAG_FILE
    lake.mkdir(parents=True, exist_ok=True)
    assets = [defs_module.payouts_daily, defs_module.payouts_quarterly, defs_module.dashboard]

    production = dg.DagsterInstance.ephemeral()  # the instance of the runs outside the backfill

    def materialize(*selection: dg.AssetsDefinition) -> dg.ExecuteInProcessResult:
        return dg.materialize(
            assets,
            selection=list(selection),
            partition_key=DAY,
            resources=defs_module.resources,
            instance=production,
        )

    tag.write_text("v1")
    materialize(defs_module.payouts_daily, defs_module.payouts_quarterly)
    old_versions = {name: DeltaTable(str(lake / name)).version() for name in TABLES}

    # A publish held between its two table commits: a downstream asset runs meanwhile; then a
    # foreign commit to the second table stops the publish part-way.
    tag.write_text("v2")
    hold = tmp_path / "go"
    monkeypatch.setenv(FAILPOINT_ENV, f"between_table_commits:hold={hold}")

    def foreign_commit() -> None:
        DeltaTable(str(lake / "payouts_quarterly")).update(updates={"tag": "'foreign'"}, predicate=f"ds = '{DAY}'")

    with dg.DagsterInstance.get() as instance:
        dashboard = lambda: materialize(defs_module.dashboard)  # noqa: E731
        thread, seen = observe(lake, hold, dashboard, mixed=("v2", "v1"), then=foreign_commit)
        stopped = run_backfill(instance)
        thread.join()
        assert seen.error is None, seen.error
        assert set(seen.library) == {("v1", "v1")} and ("v2", "v1") in seen.raw
        # The downstream asset computed from one release: its recorded inputs, and what it joined.
        [materialization] = seen.during.asset_materializations_for_node("dashboard")
        assert materialization.metadata[INPUT_VERSIONS_METADATA].value == old_versions
        pinned = production.get_run_by_id(seen.during.run_id).tags[RELEASE_PIN_TAG]
        # The log as the run started: the held publish's begin, no release (the publish stopped since).
        assert pinned == str(DeltaTable(release_log_uri(str(lake))).version())
        joined = DeltaTable(str(lake / "dashboard")).to_pandas()[["daily_tag", "quarterly_tag"]]
        assert joined.values.tolist() == [["v1", "v1"]]

        # Stopped part-way: the old release (before the foreign commit too) until `publish --force`.
        assert raw_latest(lake) == ("v2", "foreign") and through_library(lake) == ("v1", "v1")
        monkeypatch.delenv(FAILPOINT_ENV)
        publish_backfill(instance, stopped, force=True)
        assert through_library(lake) == raw_latest(lake) == ("v2", "v2")
    pin = pinned_versions(str(lake), TABLES)
    assert pin.release is not None and pin.release.backfill_id == stopped
    assert pin.versions == {name: DeltaTable(str(lake / name)).version() for name in TABLES}
