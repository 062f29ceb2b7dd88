"""A DuckDB project on Dagster's default IO manager: each asset queries DuckDB through a
resource and returns rows that the IO manager pickles."""

import dagster as dg
import duckdb

DAYS = dg.DailyPartitionsDefinition("2024-01-01")


class DuckDBResource(dg.ConfigurableResource):
    """A DuckDB connection (in memory unless `database` names a file)."""

    database: str = ":memory:"

    def connect(self) -> duckdb.DuckDBPyConnection:
        return duckdb.connect(self.database)


@dg.asset(partitions_def=DAYS)
def page_views(context: dg.AssetExecutionContext, duckdb: DuckDBResource) -> list[tuple]:
    """Three pages' views on the day."""
    # The key is a date Dagster checked against the partitions. (A query with parameters makes
    # DuckDB import pandas, seconds of every process.)
    day = f"DATE '{context.partition_key}'"
    with duckdb.connect() as connection:
        return connection.sql(
            f"SELECT {day} AS day, i AS page, (i * 7 + day({day})) % 11 AS views FROM range(3) t(i) ORDER BY i"
        ).fetchall()


@dg.asset(partitions_def=DAYS)
def busiest_page(duckdb: DuckDBResource, page_views: list[tuple]) -> tuple:
    """The page with the most views on the day."""
    rows = ", ".join(f"({page}, {views})" for _, page, views in page_views)
    with duckdb.connect() as connection:
        return connection.sql(
            f"SELECT page, views FROM (VALUES {rows}) v(page, views) ORDER BY views DESC, page LIMIT 1"
        ).fetchone()


defs = dg.Definitions(assets=[page_views, busiest_page], resources={"duckdb": DuckDBResource()})
