"""Two code locations in one module, neither called `defs`: a Definitions and a `@repository`."""

import dagster as dg

from partition_assets_tests.support.locations.code_location_forms.visits import doubled_visits, visits

visits_only = dg.Definitions(assets=[visits])


@dg.repository
def all_visits() -> list:
    return [visits, doubled_visits]
