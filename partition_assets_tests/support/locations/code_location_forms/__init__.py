"""Code locations in each form Dagster loads, written as Dagster users write them, for
partition_assets_tests/integration/test_code_location_forms.py: the same two daily assets
(`visits`, `doubled_visits`; Dagster's default IO manager, no Spark) behind a `@repository`
(repository_location) and a `dg`-scaffolded project (dg_project: `definitions.py` with
`@dg.definitions def defs()` loading its `defs/` folder); and modules that hold several
(several_locations), none (no_location) or a `@dg.definitions` function that raises
(raising_location)."""
