"""The code locations the tests and benchmarks load, as Dagster loads a user's (`-m
partition_assets_tests.support.locations.<module>`, a file, a workspace): one module per
subject, each named `<subject>_defs.py` and saying in its docstring which tests load it;
probe_assets (small assets of the storage tests), wall_clock_assets (the wall-clock lint's
cases), code_location_forms/ (each form Dagster loads a code location in) and user_projects/
(projects written as Dagster users write them, nothing of partition_assets in them).

Helpers that are not code locations are in partition_assets_tests/support itself.
Not guaranteed: that a module here loads outside a checkout of this repository.
"""
