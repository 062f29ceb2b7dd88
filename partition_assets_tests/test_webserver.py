""" "Materialize range" in the webserver, as a user clicks it in Chromium and as the GraphQL
mutation the button sends: the daemon runs the backfill and the Delta tables hold exactly
the generated rows of the chosen days."""

import re
import time
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pytest
from playwright.sync_api import sync_playwright

from partition_assets.example import assets as example_assets
from partition_assets.example import sources
from partition_assets_tests.conftest import EXAMPLE_ASSETS, ON_SQLITE, also_on_postgres, postgres_url_for
from partition_assets_tests.readers import delta_with_delta_rs
from partition_assets_tests.test_example_pipeline import expected_daily_orders, rows
from partition_assets_tests.webserver import DagsterDev

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


def test_every_example_asset_backfills_a_range_in_one_run():
    """The fastest path Dagster has: one run per asset for any range, in the UI and the CLI."""
    policies = {a.key.to_user_string(): a.backfill_policy for a in EXAMPLE_ASSETS}
    assert {k for k, p in policies.items() if p != dg.BackfillPolicy.single_run()} == set()


@pytest.fixture(scope="module", params=ON_SQLITE)
def dagster_dev(request, spark_resource, tmp_path_factory):
    """One `dagster dev` (webserver + daemon) for the module, attached to the test Spark
    server; for tests marked also_on_postgres, a second one on Postgres."""
    server = DagsterDev(
        tmp_path_factory.mktemp("dagster_dev"), postgres_url=postgres_url_for(request)
    ).wait_until_ready()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


def test_materialize_range_in_the_browser(dagster_dev, browser, spark, tmp_path):
    first, last = "2024-01-02", "2024-01-04"
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
        range_input.fill(f"[{first}-00:00...{last}-23:00]")
        range_input.press("Enter")
        dialog.get_by_role("button", name="Launch backfill").click()
        toast = page.get_by_text(re.compile(r"^Created backfill \w+$"))
        backfill_id = toast.inner_text().split()[-1]

    assert_backfill_wrote_the_days(dagster_dev, spark, backfill_id, first, last)

    with screenshot_on_failure(page, tmp_path / "backfill.png"):
        page.goto(f"{dagster_dev.url}/runs/b/{backfill_id}")
        page.get_by_text("Succeeded", exact=True).first.wait_for()
    page.close()


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


@also_on_postgres("dagster_dev")
def test_launch_partition_backfill_mutation(dagster_dev, spark):
    first, last = "2024-01-05", "2024-01-06"
    # The parameters the dialog sends: the asset selection and the root asset's keys.
    params = {
        "assetSelection": [{"path": ["events"]}, {"path": ["daily_orders"]}],
        "partitionNames": hours_of(first, last),
        "fromFailure": False,
    }
    launched = dagster_dev.graphql(LAUNCH, {"params": params})["launchPartitionBackfill"]
    assert launched["__typename"] == "LaunchBackfillSuccess", launched

    assert_backfill_wrote_the_days(dagster_dev, spark, launched["backfillId"], first, last)


def hours_of(first_day: str, last_day: str) -> list[str]:
    return example_assets.HOURLY.get_partition_keys_in_range(
        dg.PartitionKeyRange(f"{first_day}-00:00", f"{last_day}-23:00")
    )


BACKFILL = """query Backfill($id: String!) {
  partitionBackfillOrError(backfillId: $id) {
    ... on PartitionBackfill {
      status timestamp endTimestamp
      runs(limit: 100) { runId status creationTime startTime endTime assetSelection { path } tags { key value } }
    }
  }
}"""


def wait_for_backfill(dagster_dev, backfill_id: str) -> dict:
    deadline = time.monotonic() + BACKFILL_TIMEOUT
    while True:
        backfill = dagster_dev.graphql(BACKFILL, {"id": backfill_id})["partitionBackfillOrError"]
        if backfill["status"] not in ("REQUESTED", "CANCELING", "FAILING"):
            return backfill
        assert time.monotonic() < deadline, f"backfill {backfill_id} still {backfill['status']}"
        time.sleep(1)


def assert_backfill_wrote_the_days(dagster_dev, spark, backfill_id, first, last):
    backfill = wait_for_backfill(dagster_dev, backfill_id)
    assert backfill["status"] == "COMPLETED_SUCCESS", backfill
    report_timings(backfill, first, last)

    # Single-run backfill policies: one run per asset, each over the whole range.
    hours = hours_of(first, last)
    days = example_assets.DAILY.get_partition_keys_in_range(dg.PartitionKeyRange(first, last))
    ranges = {}
    for run in backfill["runs"]:
        assert run["status"] == "SUCCESS"
        tags = {t["key"]: t["value"] for t in run["tags"]}
        ranges[asset_of(run)] = (tags["dagster/asset_partition_range_start"], tags["dagster/asset_partition_range_end"])
    assert ranges == {"events": (hours[0], hours[-1]), "daily_orders": (first, last)}

    # Each run materialized exactly the chosen partitions.
    with dagster_dev.open_instance() as instance:
        for run in backfill["runs"]:
            materialized = {
                e.dagster_event.partition
                for e in instance.all_logs(run["runId"], of_type=dg.DagsterEventType.ASSET_MATERIALIZATION)
            }
            assert materialized == set(hours if asset_of(run) == "events" else days)

    # The tables hold the generator's rows for exactly these days.
    start = datetime.fromisoformat(first).replace(tzinfo=UTC)
    generated = sources.hourly_events(spark, start, len(hours)).toPandas()
    events = delta_with_delta_rs(dagster_dev.lake / "events")
    events = events[events.ds.isin(hours)]
    assert rows(events, "event_id") == rows(generated, "event_id")

    orders = delta_with_delta_rs(dagster_dev.lake / "daily_orders")
    orders = orders[orders.ds.isin(days)].set_index(["ds", "region"]).sort_index()
    expected = expected_daily_orders(generated)
    assert list(orders.index) == list(expected.index)
    assert list(orders.orders) == list(expected.orders)
    assert list(orders.revenue.astype(float)) == pytest.approx(list(expected.revenue))


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
