"""A `@repository` entry point (Dagster's form before Definitions)."""

import dagster as dg

from partition_assets_tests.support.locations.code_location_forms.visits import doubled_visits, visits


@dg.repository
def analytics() -> list:
    return [visits, doubled_visits]
