"""A `@dg.definitions` function that raises while the location loads."""

import dagster as dg


@dg.definitions
def defs() -> dg.Definitions:
    raise KeyError("WAREHOUSE_URL")
