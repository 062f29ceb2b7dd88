"""Join two tables of a lake at one release with delta-rs and pandas: no Dagster, no Spark.

Usage: python read_release_pandas.py LAKE_ROOT
"""

import sys

from deltalake import DeltaTable

from partition_assets.storage.release_reads import pinned_versions

lake = sys.argv[1]
tables = ["payouts_daily", "payouts_quarterly"]
pin = pinned_versions(lake, tables)  # one read of the release log, and each table's latest version
daily, quarterly = (DeltaTable(f"{lake}/{table}", version=pin.versions[table]).to_pandas() for table in tables)
joined = daily.merge(quarterly, on="ds", suffixes=("_daily", "_quarterly"))
print(joined.to_json(orient="records"))
