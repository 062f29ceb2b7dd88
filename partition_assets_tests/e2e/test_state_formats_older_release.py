"""A backfill that an earlier release of partition_assets left behind, finished by this one
through `partition-assets backfill` (issue 55, docs/guide/upgrading.md): the state is real,
written by the commits named in partition_assets_tests/support/older_releases, before formats
were versioned (d216097) and before staging fingerprints existed (ade35ca)."""

import json

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from partition_assets.backfill.model import BackfillStatus
from partition_assets.backfill.state.store import BackfillStore
from partition_assets.state_formats import RECORD_FORMAT
from partition_assets_tests.support.cli_runs import ok
from partition_assets_tests.support.lakehouse import TABLES, Lakehouse, days, expected_orders
from partition_assets_tests.support.older_releases import older_state, stored_body

pytestmark = pytest.mark.slow


def test_a_gate_failed_backfill_of_an_earlier_release_is_reviewed_and_published_by_this_one(tmp_path, home_template):
    house = Lakehouse(tmp_path, home_template)
    with house.instance() as instance:
        older = older_state("d216097", tmp_path, instance)
    bid = older.gate_failed

    assert f"backfill {bid} (gate_failed)" in ok(house.cli("status", bid))
    assert "orders" in ok(house.cli("diff", bid))
    ok(house.cli("publish", bid, "--force"))

    # The earlier release's gate fingerprinted this staging: it is what is published.
    assert house.content("orders") == expected_orders(days(1, 2), 3)
    assert house.versions() == dict.fromkeys(TABLES, 1)
    ledger = json.loads(ok(house.cli("ledger", bid, "--json")))
    assert {(row["asset"], row["status"], row["published_version"]) for row in ledger} == {
        (table, "published", 1) for table in TABLES
    }
    assert not list(older.lake.glob("*/_leases/*.json"))  # its parked leases released
    with house.instance() as instance:
        assert BackfillStore(instance).load(bid).status == BackfillStatus.PUBLISHED
        assert stored_body(instance, bid)["format"] == RECORD_FORMAT  # saved again in this release's format


def test_a_backfill_gated_before_staging_fingerprints_is_published_when_it_holds_what_its_ledger_says(
    tmp_path, home_template
):
    house = Lakehouse(tmp_path, home_template)
    with house.instance() as instance:
        older = older_state("ade35ca", tmp_path, instance)
    bid = older.gate_failed

    ok(house.cli("publish", bid, "--force"))

    assert house.content("orders") == expected_orders(days(1, 2), 3)
    assert house.versions() == dict.fromkeys(TABLES, 1)
    with house.instance() as instance:
        gated = BackfillStore(instance).load(bid).gated_staging
    assert set(gated) == set(TABLES) and {fingerprint["format"] for fingerprint in gated.values()} == {2}


def test_a_backfill_gated_before_staging_fingerprints_whose_staging_changed_is_refused_saying_so(
    tmp_path, home_template
):
    house = Lakehouse(tmp_path, home_template)
    with house.instance() as instance:
        older = older_state("ade35ca", tmp_path, instance)
    bid = older.gate_failed
    staged = sorted(older.lake.glob(f"orders/_backfills/{bid}/data/ds=2024-01-01/*.parquet"))[0]
    data = pq.read_table(staged)
    pq.write_table(data.set_column(1, "amount", pc.multiply(data.column("amount"), 2)), staged)  # by hand

    refused = house.cli("publish", bid, "--force")

    assert refused.returncode != 0
    message = " ".join((refused.stdout + refused.stderr).split())
    assert "has no fingerprint of what its validation gate evaluated" in message, message
    assert "gated by a release of partition_assets before staging fingerprints" in message
    assert "does not hold what the gate recorded in the ledger" in message
    assert f"`partition-assets backfill resume {bid}` gates the staging as it is now" in message
    assert house.versions() == dict.fromkeys(TABLES, 0)  # nothing published
