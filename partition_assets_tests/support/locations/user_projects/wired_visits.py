"""code_location_forms' visits wired by `partition_assets.definitions` and nothing else: no
asset asks for Spark, so the project keeps Dagster's default IO manager and no Spark."""

import partition_assets
from partition_assets_tests.support.locations.code_location_forms.visits import doubled_visits, visits

defs = partition_assets.definitions(assets=[visits, doubled_visits], module=__name__)
