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
    with duckdb.connect() as connection:
        return connection.execute(
            "SELECT ?::DATE AS day, i AS page, (i * 7 + day(?::DATE)) % 11 AS views FROM range(3) t(i) ORDER BY i",
            [context.partition_key, context.partition_key],
        ).fetchall()


@dg.asset(partitions_def=DAYS)
def busiest_page(duckdb: DuckDBResource, page_views: list[tuple]) -> tuple:
    """The page with the most views on the day."""
    with duckdb.connect() as connection:
        connection.execute("CREATE TABLE views (day DATE, page BIGINT, views BIGINT)")
        connection.executemany("INSERT INTO views VALUES (?, ?, ?)", page_views)
        return connection.execute("SELECT page, views FROM views ORDER BY views DESC, page LIMIT 1").fetchone()


defs = dg.Definitions(assets=[page_views, busiest_page], resources={"duckdb": DuckDBResource()})
