"""The example code location's definitions, as the webserver and the CLI read them."""

import dagster as dg

from partition_assets_tests.support.example_tables import EXAMPLE_ASSETS


def test_every_example_asset_backfills_a_range_in_one_run():
    """The fastest path Dagster has: one run per asset for any range, in the UI and the CLI."""
    policies = {a.key.to_user_string(): a.backfill_policy for a in EXAMPLE_ASSETS}
    assert {k for k, p in policies.items() if p != dg.BackfillPolicy.single_run()} == set()
