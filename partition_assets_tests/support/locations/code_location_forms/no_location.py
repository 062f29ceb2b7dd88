"""A `defs` that is a plain function: its `@dg.definitions` decorator is missing."""

import dagster as dg

from partition_assets_tests.support.locations.code_location_forms.visits import visits


def defs() -> dg.Definitions:
    return dg.Definitions(assets=[visits])
