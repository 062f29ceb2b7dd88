"""Join two tables of a lake at one release with DuckDB, given the versions that
`partition-assets release show --json --lake LAKE_ROOT` printed (no partition_assets import).

Usage: partition-assets release show --json --lake LAKE_ROOT > release.json
       python read_release_duckdb.py release.json
"""

import json
import sys

import duckdb
from deltalake import DeltaTable

pin = json.loads(open(sys.argv[1]).read())
connection = duckdb.connect()
for table, version in pin["versions"].items():
    # DuckDB's delta_scan reads the latest version only: delta-rs opens the pinned one.
    connection.register(table, DeltaTable(f"{pin['lake_root']}/{table}", version=version).to_pyarrow_dataset())
joined = connection.sql(
    "SELECT d.ds, d.tag AS tag_daily, q.tag AS tag_quarterly FROM payouts_daily d JOIN payouts_quarterly q USING (ds)"
)
print(joined.df().to_json(orient="records"))
