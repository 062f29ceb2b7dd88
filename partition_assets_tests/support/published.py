"""What a staged backfill's publish left in a lakehouse (support/lakehouse.py), for the tests
that compare a disturbed publish (killed in a stage, upgraded mid-backfill) with an
undisturbed one of the same backfill.

Not guaranteed: what differs between two runs of one backfill (ids, times) is left out.
"""

from dataclasses import dataclass

import dagster as dg

from partition_assets.backfill.publishing.dagster_events import PUBLISH_RUN_TAG
from partition_assets.backfill.state.ledger import Ledger, ledger_uri
from partition_assets.run_tags import BACKFILL_ID_TAG
from partition_assets.storage.release_log import read_log
from partition_assets_tests.support.lakehouse import Lakehouse


@dataclass(frozen=True)
class Published:
    """What a publish of a backfill left, without what differs between two runs of it (ids, times)."""

    contents: dict
    versions: dict[str, int]
    ledger: list[tuple]  # every row the backfill appended
    releases: list[tuple]  # every release log record of the backfill
    publish_runs: int  # that succeeded
    unended_publish_runs: int  # publish runs not ended (a killed publish's, until its resume ends them)
    materialized: list[tuple[str, str | None]]  # (asset, partition) per materialization of its publish runs
    published_notifications: int


def published_by(house: Lakehouse, bid: str) -> Published:
    ledger = Ledger(ledger_uri(str(house.lake))).entries(bid)
    log = read_log(str(house.lake)).rows
    with house.instance() as instance:
        runs = instance.get_runs(dg.RunsFilter(tags={BACKFILL_ID_TAG: bid, PUBLISH_RUN_TAG: "true"}))
        materialized = sorted(
            (materialization.asset_key.to_user_string(), materialization.partition)
            for run in runs
            for entry in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION)
            if (materialization := entry.asset_materialization) is not None
        )
    return Published(
        contents=house.contents(),
        versions=house.versions(),
        ledger=sorted(
            (row.asset, row.partition, row.status, row.rows, row.checksum, row.published_version, str(row.gate))
            for row in ledger
        ),
        releases=sorted(
            (row["sequence"] or 0, row["kind"], row["operation"], row["table"] or "", row["version"])
            for row in log
            if row["backfill_id"] == bid
        ),
        publish_runs=sum(run.status == dg.DagsterRunStatus.SUCCESS for run in runs),
        unended_publish_runs=sum(not run.is_finished for run in runs),
        materialized=materialized,
        published_notifications=house.events().count("published"),
    )
