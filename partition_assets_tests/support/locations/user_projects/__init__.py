"""Code locations written as Dagster users write them, nothing of partition_assets in them
(partition_assets_tests/integration/test_code_location_user_projects.py backfills each on the engine and with
`dagster asset materialize`). The `dg` project and the `@repository` are
code_location_forms' own."""
