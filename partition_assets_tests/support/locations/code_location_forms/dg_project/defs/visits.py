"""The project's assets, found by `dg.load_from_defs_folder`."""

from partition_assets_tests.support.locations.code_location_forms.visits import doubled_visits, visits

__all__ = ["doubled_visits", "visits"]
