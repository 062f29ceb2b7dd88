""" "Materialize range" in the webserver, as a user clicks it in Chromium: the sparse engine
runs it as a Dagster backfill (listed on the Backfills page with its progress, canceled from
it), and the Delta tables hold exactly the generated rows of the chosen days. A backfill
tagged `partition_assets/engine=dagster` runs on Dagster's daemon; one started from the
command line is listed on the same page, its runs queued by the repo's QueuedRunCoordinator
(`--runs-via launcher`) and launched by the daemon."""

import json
import os
import re
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlencode

import dagster as dg
import pytest
from deltalake import DeltaTable
from playwright.sync_api import sync_playwright

from partition_assets.backfill.dagster_ui.gate_asset_checks import GATE_CHECK
from partition_assets.backfill.model import BackfillStatus
from partition_assets.backfill.state.approval import APPROVAL_TAG
from partition_assets.backfill.state.store import BackfillStore
from partition_assets.dagster_instance.daemon_filter import DAGSTER, ENGINE_TAG, SPARSE
from partition_assets.run_tags import BACKFILL_ID_TAG
from partition_assets_tests.support import REPO
from partition_assets_tests.support.cli_runs import run_cli
from partition_assets_tests.support.example_tables import assert_tables_hold_the_days, days_of, hours_of
from partition_assets_tests.support.instances import ON_SQLITE, URL_ENV, also_on_postgres, postgres_url_for
from partition_assets_tests.support.launched_runs import assert_launched_by_the_launcher, node_runs
from partition_assets_tests.support.locations.ui_engine_defs import FACTOR_FILE, RELEASE_DIR_ENV
from partition_assets_tests.support.polling import wait_for
from partition_assets_tests.support.processes import session_members
from partition_assets_tests.support.webserver import DagsterDev

pytestmark = pytest.mark.slow

CHROMIUM = "/usr/bin/chromium"
# The network here is closed: without the background-networking flags Chromium hangs on
# connections it opens by itself.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
BACKFILL_TIMEOUT = 420
UI_ENGINE_DEFS = "partition_assets_tests.support.locations.ui_engine_defs"
# The docs' screenshots of the workflow (docs/assets/ui-*.png) are this walk-through's, taken
# anew with PARTITION_ASSETS_DOCS_SCREENSHOTS=1; otherwise they go to the test's temp folder,
# so that `make test` leaves the work tree as it found it.
DOCS_SCREENSHOTS_ENV = "PARTITION_ASSETS_DOCS_SCREENSHOTS"


@pytest.fixture(scope="module")
def release_dir(tmp_path_factory) -> Path:
    """Where the tests release `held`'s runs (partition_assets_tests/support/locations/ui_engine_defs.py)."""
    return tmp_path_factory.mktemp("release")


@pytest.fixture(scope="module", params=ON_SQLITE)
def dagster_dev(request, spark_resource, tmp_path_factory, release_dir):
    """One `dagster dev` (webserver + daemon) for the module, attached to the test Spark server,
    serving the example plus `held` and `quick`; the engine takes its UI backfills (the
    `make dev` setup, whose dagster.yaml names the example). For tests marked
    also_on_postgres, a second one on Postgres."""
    server = DagsterDev(
        tmp_path_factory.mktemp("dagster_dev"),
        UI_ENGINE_DEFS,
        env={RELEASE_DIR_ENV: str(release_dir)},
        engine_modules=[UI_ENGINE_DEFS],
        postgres_url=postgres_url_for(request),
    ).wait_until_ready()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


def test_materialize_range_in_the_browser_runs_on_the_engine(dagster_dev, browser, spark, tmp_path):
    day = "2024-01-02"
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.set_default_timeout(90_000)  # a loaded 2-core machine renders the asset graph slowly
    with screenshot_on_failure(page, tmp_path / "launch.png"):
        # daily_orders with its upstream events, as the asset's Lineage tab shows them.
        page.goto(f"{dagster_dev.url}/assets/daily_orders?view=lineage&lineageScope=upstream&lineageDepth=1")
        page.get_by_role("button", name="Materialize all…").click()
        dialog = page.get_by_role("dialog")
        # The dialog opens on the last 90 days; the example's partitions start in 2024.
        dialog.get_by_text("Show all partitions").click()
        # Two assets with different partitions: the range is picked on the root (hourly) asset.
        dialog.get_by_text("events", exact=True).wait_for()
        range_input = dialog.get_by_role("textbox")
        range_input.fill(f"[{day}-00:00...{day}-23:00]")
        range_input.press("Enter")
        clicked = time.time()
        dialog.get_by_role("button", name="Launch backfill").click()
        toast = page.get_by_text(re.compile(r"^Created backfill \w+$"))
        backfill_id = toast.inner_text().split()[-1]

    with screenshot_on_failure(page, tmp_path / "progress.png"):
        # The Backfills page lists it, in progress, with a row per asset.
        page.goto(f"{dagster_dev.url}/runs/b/{backfill_id}")
        wait_for_text(page, r"events\s+\d+% completed\s+24\s+\d+\s+\d+\s+0")
        wait_for_text(page, r"daily_orders\s+\d+% completed\s+1\s+\d+\s+\d+\s+0")
    backfill = assert_engine_backfill_wrote_the_days(dagster_dev, spark, backfill_id, day, day)
    first_started = min(run["startTime"] for run in backfill["runs"])
    print(
        f"engine backfill of {day} from the dialog: click -> first node run started {first_started - clicked:.1f} s, "
        f"click -> complete {backfill['endTimestamp'] - clicked:.1f} s, {len(backfill['runs'])} runs"
    )

    with screenshot_on_failure(page, tmp_path / "done.png"):
        page.reload()
        # Per asset: targeted, in progress, succeeded, failed.
        wait_for_text(page, r"events\s+100% completed\s+24\s+0\s+24\s+0")
        wait_for_text(page, r"daily_orders\s+100% completed\s+1\s+0\s+1\s+0")
    page.close()


def assert_engine_backfill_wrote_the_days(dagster_dev, spark, backfill_id: str, first: str, last: str) -> dict:
    """The backfill ran on the engine to success, Dagster's partition status holds its days
    and the tables their rows; returns the backfill."""
    backfill = wait_for_backfill(dagster_dev, backfill_id)
    assert backfill["status"] == "COMPLETED_SUCCESS", backfill
    tags = {t["key"]: t["value"] for t in backfill["tags"]}
    assert tags[ENGINE_TAG] == SPARSE
    # Every run is an engine node run of this backfill (none of Dagster's daemon).
    assert backfill["runs"] and all(tag_of(run, BACKFILL_ID_TAG) == backfill_id for run in backfill["runs"])

    with dagster_dev.open_instance() as instance:
        # Published: Dagster's partition status holds the days, as the asset pages colour them.
        assert set(hours_of(first, last)) <= set(instance.get_materialized_partitions(dg.AssetKey("events")))
        assert set(days_of(first, last)) <= set(instance.get_materialized_partitions(dg.AssetKey("daily_orders")))
    assert_tables_hold_the_days(dagster_dev.lake, spark, first, last)
    return backfill


def test_cancel_in_the_ui_stops_a_running_engine_backfill(dagster_dev, browser, release_dir, tmp_path):
    """Six days of `held` (3 run at once, each waiting for its release): Cancel in the page
    cancels the 3 in flight and launches nothing more, even once they are released.
    Three: the repo's dagster.yaml runs 4 runs at once, and backfills leave one of them to
    production (`partition_assets: backfills: reserve_runs`, 1 by default)."""
    days = [f"2024-03-{d:02d}" for d in range(1, 7)]
    backfill_id = launch(dagster_dev, {"assetSelection": [{"path": ["held"]}], "partitionNames": days})

    def three_started():
        """3 node runs started"""
        runs = backfill_of(dagster_dev, backfill_id)["runs"]
        return len([r for r in runs if r["status"] == "STARTED"]) == 3

    wait_for(three_started, BACKFILL_TIMEOUT, step=1)
    coordinator = session_running(dagster_dev, backfill_of(dagster_dev, backfill_id)["runs"][0]["runId"])
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.set_default_timeout(90_000)
    with screenshot_on_failure(page, tmp_path / "cancel.png"):
        page.goto(f"{dagster_dev.url}/runs/b/{backfill_id}")
        wait_for_text(page, r"held\s+\d+% completed\s+6\s+3\s+0\s+0")  # 3 of 6 in progress
        page.get_by_role("button").last.click()  # the backfill's action menu, top right
        page.get_by_role("menuitem", name="Cancel backfill").click()
        page.locator(".dagster-dialog").get_by_role("button", name="Cancel backfill").click()
        canceled = time.time()
        page.get_by_text("Canceled", exact=True).first.wait_for()
    page.close()
    backfill = wait_for_backfill(dagster_dev, backfill_id)
    assert backfill["status"] == "CANCELED", backfill
    print(f"cancel -> canceled {backfill['endTimestamp'] - canceled:.1f} s")
    assert sorted(run["status"] for run in backfill["runs"]) == ["CANCELED"] * 3

    for day in days:  # released now: nothing is left to run them
        (release_dir / day).touch()
    # Once no process of its coordinator is left (its workers end with it), none can launch a run.
    wait_for(lambda: not session_members(coordinator), 60)
    assert len(backfill_of(dagster_dev, backfill_id)["runs"]) == 3


def session_running(dagster_dev, run_id: str) -> int:
    """The session of the process that runs the node run `run_id`: its coordinator's."""
    with dagster_dev.open_instance() as instance:
        (started,) = instance.all_logs(run_id, of_type=dg.DagsterEventType.RUN_START)
    return os.getsid(started.dagster_event.pid)


def test_a_cli_backfill_s_queued_runs_are_launched_by_the_daemon_and_it_is_listed_on_the_backfills_page(
    dagster_dev, browser, tmp_path
):
    """`--runs-via launcher` with the repo's QueuedRunCoordinator: the coordinator queues each
    node run, the daemon of `dagster dev` launches it through the DefaultRunLauncher; the
    backfill is listed on the Backfills page."""
    ran = run_cli(
        *[
            "backfill",
            "run",
            "-m",
            UI_ENGINE_DEFS,
            "--select",
            "key:quick",
            "--start",
            "2024-01-01",
            "--end",
            "2024-01-03",
            "--runs-via",
            "launcher",
        ],
        env={**os.environ, **dagster_dev.instance_env, "PARTITION_ASSETS_LAKE": str(dagster_dev.lake)},
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    backfill_id = ran.stdout.split("backfill ", 1)[1].split(":", 1)[0]
    runs = node_runs(dagster_dev.home, backfill_id)
    assert sorted(run.tags["dagster/partition"] for run in runs) == ["2024-01-01", "2024-01-02", "2024-01-03"]
    assert {run.status for run in runs} == {dg.DagsterRunStatus.SUCCESS}
    assert_launched_by_the_launcher(dagster_dev.home, backfill_id)
    with dagster_dev.open_instance() as instance:
        for run in runs:  # queued by the coordinator, then launched by the daemon
            assert instance.get_records_for_run(run.run_id, of_type=dg.DagsterEventType.RUN_ENQUEUED).records

    listed = dagster_dev.graphql(BACKFILLS_FEED)["runsFeedOrError"]["results"]
    (entry,) = [b for b in listed if b["id"] == backfill_id]
    assert entry["status"] == "COMPLETED_SUCCESS"
    (quick,) = entry["assetBackfillData"]["assetBackfillStatuses"]
    assert (quick["numPartitionsTargeted"], quick["numPartitionsMaterialized"], quick["numPartitionsFailed"]) == (
        3,
        3,
        0,
    )

    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.set_default_timeout(90_000)
    with screenshot_on_failure(page, tmp_path / "backfills.png"):
        page.goto(f"{dagster_dev.url}/runs?view=backfills")
        page.get_by_text(backfill_id, exact=True).wait_for()
    page.close()


def wait_for_text(page, pattern: str, timeout: float = 90) -> None:
    """Waits until the page's visible text matches `pattern` (cells are separated by whitespace)."""

    def shown():
        """the page to show the pattern"""
        return re.search(pattern, page.inner_text("body"))

    wait_for(shown, timeout, step=0.5)


@contextmanager
def screenshot_on_failure(page, path: Path):
    try:
        yield
    except Exception as error:
        page.screenshot(path=path, full_page=True)
        raise AssertionError(f"UI step failed; screenshot: {path}") from error


LAUNCH = """mutation Launch($params: LaunchBackfillParams!) {
  launchPartitionBackfill(backfillParams: $params) {
    __typename
    ... on LaunchBackfillSuccess { backfillId }
    ... on Error { message }
  }
}"""


def launch(dagster_dev, params: dict) -> str:
    """`launchPartitionBackfill` with `params`, as the dialog sends it; the backfill's id."""
    launched = dagster_dev.graphql(LAUNCH, {"params": {"fromFailure": False, **params}})["launchPartitionBackfill"]
    assert launched["__typename"] == "LaunchBackfillSuccess", launched
    return launched["backfillId"]


# The stock path's days: no other test here writes them.
DAEMON_DAYS = ("2024-01-05", "2024-01-06")


@pytest.fixture(scope="module", autouse=True)
def daemon_backfill(dagster_dev) -> str | None:
    """Launched as soon as the module's SQLite server is up, before its first test: a backfill
    tagged `dagster`, so that its wait on Dagster's daemon (fixed 30 s ticks, one per asset
    and one to complete) overlaps the other tests;
    test_a_backfill_tagged_dagster_runs_on_dagsters_daemon checks it. None on Postgres."""
    if URL_ENV in dagster_dev.instance_env:
        return None
    first, last = DAEMON_DAYS
    # The parameters the dialog sends: the asset selection and the root asset's keys.
    return launch(
        dagster_dev,
        {
            "assetSelection": [{"path": ["events"]}, {"path": ["daily_orders"]}],
            "partitionNames": hours_of(first, last),
            "tags": [{"key": ENGINE_TAG, "value": DAGSTER}],
        },
    )


def test_a_backfill_tagged_dagster_runs_on_dagsters_daemon(dagster_dev, daemon_backfill, spark):
    """The stock path, per backfill: the tag `partition_assets/engine=dagster` (the dialog's
    tags, or the mutation's) leaves it to Dagster's daemon: one run per asset over the range.
    (SQLite only: which storage the instance keeps does not change what the daemon does; the
    engine's side of the routing on Postgres is the warm-standby test.)"""
    assert_backfill_wrote_the_days(dagster_dev, spark, daemon_backfill, *DAEMON_DAYS)


BACKFILL = """query Backfill($id: String!) {
  partitionBackfillOrError(backfillId: $id) {
    ... on PartitionBackfill {
      status timestamp endTimestamp tags { key value }
      runs(limit: 100) { runId status creationTime startTime endTime assetSelection { path } tags { key value } }
    }
  }
}"""


def backfill_of(dagster_dev, backfill_id: str) -> dict:
    return dagster_dev.graphql(BACKFILL, {"id": backfill_id})["partitionBackfillOrError"]


def wait_for_backfill(dagster_dev, backfill_id: str) -> dict:
    def finished():
        """the backfill to finish"""
        backfill = backfill_of(dagster_dev, backfill_id)
        return backfill if backfill["status"] not in ("REQUESTED", "CANCELING", "FAILING") else None

    return wait_for(finished, BACKFILL_TIMEOUT, step=1)


# The Backfills page (Runs -> Backfills): its feed, with each backfill's per-asset progress.
BACKFILLS_FEED = """{
  runsFeedOrError(limit: 50, view: BACKFILLS) {
    ... on RunsFeedConnection {
      results {
        id
        ... on PartitionBackfill {
          status
          assetBackfillData {
            assetBackfillStatuses {
              ... on AssetPartitionsStatusCounts {
                assetKey { path } numPartitionsTargeted numPartitionsMaterialized numPartitionsFailed
              }
            }
          }
        }
      }
    }
  }
}"""


def tag_of(run: dict, key: str) -> str | None:
    return next((t["value"] for t in run["tags"] if t["key"] == key), None)


def assert_backfill_wrote_the_days(dagster_dev, spark, backfill_id, first, last):
    backfill = wait_for_backfill(dagster_dev, backfill_id)
    assert backfill["status"] == "COMPLETED_SUCCESS", backfill
    report_timings(backfill, first, last)

    # Single-run backfill policies: one run per asset, each over the whole range.
    hours = hours_of(first, last)
    days = days_of(first, last)
    ranges = {}
    for run in backfill["runs"]:
        assert run["status"] == "SUCCESS"
        tags = {t["key"]: t["value"] for t in run["tags"]}
        ranges[asset_of(run)] = (tags["dagster/asset_partition_range_start"], tags["dagster/asset_partition_range_end"])
    assert ranges == {"events": (hours[0], hours[-1]), "daily_orders": (first, last)}

    # Dagster's daemon ran it: no engine node run among them.
    assert not any(tag_of(run, BACKFILL_ID_TAG) for run in backfill["runs"])

    # Each run materialized exactly the chosen partitions.
    with dagster_dev.open_instance() as instance:
        for run in backfill["runs"]:
            materialized = {
                e.dagster_event.partition
                for e in instance.all_logs(run["runId"], of_type=dg.DagsterEventType.ASSET_MATERIALIZATION)
            }
            assert materialized == set(hours if asset_of(run) == "events" else days)

    assert_tables_hold_the_days(dagster_dev.lake, spark, first, last)


def asset_of(run) -> str:
    (asset,) = ["/".join(a["path"]) for a in run["assetSelection"]]
    return asset


def report_timings(backfill: dict, first: str, last: str) -> None:
    """Prints launch -> complete and each run's queue and execution time (`pytest -s`)."""
    launched = backfill["timestamp"]
    lines = [f"backfill {first}..{last}: launch -> complete {backfill['endTimestamp'] - launched:.1f} s"]
    for run in sorted(backfill["runs"], key=lambda r: r["creationTime"]):
        lines.append(
            f"  {asset_of(run)}: created +{run['creationTime'] - launched:.1f} s, "
            f"started +{run['startTime'] - launched:.1f} s, ran {run['endTime'] - run['startTime']:.1f} s"
        )
    print("\n".join(lines))


def standby_coordinators(home: Path) -> set[int]:
    """Pids of the `backfill standby` processes of the instance at `home`."""
    found = subprocess.run(["pgrep", "-f", "partition_assets backfill standby"], capture_output=True, text=True)
    pids = set()
    for pid in map(int, found.stdout.split()):
        try:
            environment = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:  # it ended meanwhile
            continue
        if f"DAGSTER_HOME={home}".encode() in environment:
            pids.add(pid)
    return pids


@also_on_postgres("dagster_dev")
def test_the_webserver_hands_a_launch_to_its_warm_standby_coordinator(dagster_dev, spark):
    """The webserver keeps a coordinator waiting with Dagster, the engine and the code
    location imported: a launch (the dialog's mutation, untagged) is handed to it, runs on
    the engine, and another one waits for the next. Also on PostgreSQL: the engine's side of
    the UI routing there (Dagster's daemon path runs on SQLite only)."""
    waiting = wait_for(lambda: standby_coordinators(dagster_dev.home), timeout=120)
    dagster_dev.wait_for_standby()  # its workers loaded too
    first = last = "2024-01-09"
    backfill_id = launch(
        dagster_dev,
        {"assetSelection": [{"path": ["events"]}, {"path": ["daily_orders"]}], "partitionNames": hours_of(first, last)},
    )
    assert_engine_backfill_wrote_the_days(dagster_dev, spark, backfill_id, first, last)
    log = (dagster_dev.home / "partition_assets" / "backfills" / f"{backfill_id}.log").read_text()
    adopter = int(re.search(rf"standby (\d+) adopts backfill {backfill_id}", log).group(1))
    assert adopter in waiting
    assert wait_for(lambda: standby_coordinators(dagster_dev.home) - {adopter}, timeout=60)


def test_the_safe_backfill_workflow_runs_in_the_browser_without_a_shell(dagster_dev, browser, release_dir, tmp_path):
    """A range from the Materialize dialog whose gate fails; its `backfill_gate` check and diff
    on the asset page; publish --force from the Launchpad, then rollback, each seen in the
    table; and a backfill that requires approval, approved from the Launchpad."""
    shots = REPO / "docs" / "assets" if os.environ.get(DOCS_SCREENSHOTS_ENV) == "1" else tmp_path
    days = ["2024-04-01", "2024-04-02"]
    first = launch(dagster_dev, {"assetSelection": [{"path": ["adjusted"]}], "partitionNames": days})
    wait_for_status(dagster_dev, first, BackfillStatus.PUBLISHED)
    table = str(dagster_dev.lake / "adjusted")
    original = amounts(table)
    assert original == [1.0, 1.0, 2.0, 2.0, 3.0, 3.0]
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.set_default_timeout(90_000)
    with screenshot_on_failure(page, tmp_path / "passed.png"):
        # The passed gate counts for the materializations it judged: not "Not evaluated".
        gate_status_reads(page, dagster_dev, "Succeeded", "Passed", first)

    (release_dir / FACTOR_FILE).write_text("3")  # amounts x3: past the gate's 10 % budget
    with screenshot_on_failure(page, tmp_path / "gate.png"):
        page.goto(f"{dagster_dev.url}/assets/adjusted")
        page.get_by_role("button", name=re.compile(r"Materialize…")).first.click()
        dialog = page.get_by_role("dialog")
        dialog.get_by_text("Show all partitions").click()
        range_input = dialog.get_by_role("textbox")
        range_input.fill(f"[{days[0]}...{days[1]}]")
        range_input.press("Enter")
        dialog.get_by_role("button", name="Launch backfill").click()
        gated = page.get_by_text(re.compile(r"^Created backfill \w+$")).inner_text().split()[-1]
        wait_for_status(dagster_dev, gated, BackfillStatus.GATE_FAILED)

        gate_status_reads(page, dagster_dev, "Failed", "Failed", gated)
        page.screenshot(path=shots / "ui-gate-check.png", full_page=True)
        page.get_by_text("[Show Markdown]").first.click()  # the diff, as `backfill diff` prints it
        page.get_by_role("dialog").get_by_text(re.compile(r"amount: 6 -> 18")).first.wait_for()
        page.screenshot(path=shots / "ui-gate-diff.png")
    assert amounts(table) == original  # nothing published

    launch_operation(page, dagster_dev, tmp_path, "backfill_publish", backfill_id=gated, force=True)
    assert amounts(table) == [3.0, 3.0, 6.0, 6.0, 9.0, 9.0]
    launch_operation(page, dagster_dev, tmp_path, "backfill_rollback", backfill_id=gated)
    assert amounts(table) == original

    (release_dir / FACTOR_FILE).write_text("1.05")  # within the budget: the gate passes
    waiting = launch(
        dagster_dev,
        {
            "assetSelection": [{"path": ["adjusted"]}],
            "partitionNames": days,
            "tags": [{"key": APPROVAL_TAG, "value": "required"}],  # as the dialog's tags set it
        },
    )
    wait_for_status(dagster_dev, waiting, BackfillStatus.AWAITING_APPROVAL)
    assert amounts(table) == original
    launch_operation(page, dagster_dev, tmp_path, "backfill_approve", backfill_id=waiting, approver="ana")
    with screenshot_on_failure(page, tmp_path / "approve.png"):
        page.get_by_text(f"backfill {waiting} approved by ana and published").first.wait_for()
        page.screenshot(path=shots / "ui-approval.png", full_page=True)
    assert amounts(table) == [1.05, 1.05, 2.1, 2.1, 3.15, 3.15]
    with dagster_dev.open_instance() as instance:
        assert BackfillStore(instance).load(waiting).approval.approved_by == "ana"
    page.close()


def gate_status_reads(page, dagster_dev, listed: str, evaluated: str, backfill_id: str) -> None:
    """The asset page's *Checks* tab shows `backfill_gate` as `listed` in the checks' list
    (Succeeded, Failed) and its latest execution as `evaluated` (Passed, Failed), naming
    `backfill_id`."""
    page.goto(f"{dagster_dev.url}/assets/adjusted?view=checks")
    page.get_by_text(GATE_CHECK).first.click()
    page.get_by_text(re.compile(rf"^{listed}$")).first.wait_for()
    page.get_by_text(re.compile(rf"^{evaluated}$")).last.wait_for()
    page.get_by_text(backfill_id).first.wait_for()  # the latest execution names its backfill
    assert page.get_by_text("Not evaluated").count() == 0, page.inner_text("body")


def wait_for_status(dagster_dev, backfill_id: str, status: BackfillStatus) -> None:
    """Waits until the engine's record of `backfill_id` has `status`."""

    def reached():
        """the backfill's status"""
        with dagster_dev.open_instance() as instance:
            store = BackfillStore(instance)
            return store.exists(backfill_id) and store.status(backfill_id) == status

    wait_for(reached, BACKFILL_TIMEOUT, step=1)


def amounts(table: str) -> list[float]:
    return sorted(round(amount, 6) for amount in DeltaTable(table).to_pandas().amount)


def launch_operation(page, dagster_dev, shots: Path, job: str, **config) -> None:
    """Opens `job`'s Launchpad with `config` (what "Open in Launchpad" does), clicks Launch Run
    and waits for the run to succeed; the page then shows the run."""
    lines = "".join(f"      {key}: {json.dumps(value)}\n" for key, value in config.items())
    yaml = f"ops:\n  {job}_op:\n    config:\n{lines}"
    location = f"__repository__@{dagster_dev.location}"
    with screenshot_on_failure(page, shots / f"{job}.png"):
        page.goto(f"{dagster_dev.url}/locations/{location}/jobs/{job}/playground/setup?{urlencode({'config': yaml})}")
        page.get_by_role("button", name="Launch Run").click()
        page.wait_for_url(re.compile(r"/runs/[0-9a-f-]+"))
    run_id = page.url.rsplit("/runs/", 1)[1].split("?")[0]

    def finished():
        """the operation's run to finish"""
        with dagster_dev.open_instance() as instance:
            run = instance.get_run_by_id(run_id)
            return run if run is not None and run.is_finished else None

    run = wait_for(finished, BACKFILL_TIMEOUT, step=1)
    assert run.status == dg.DagsterRunStatus.SUCCESS, (job, run.status)
