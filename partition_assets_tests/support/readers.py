"""Independent readers of the tables this library writes: delta-rs, DuckDB, pyarrow."""

from pathlib import Path

import duckdb
import duckdb_ext
import pandas as pd
import pyarrow.dataset as ds
from deltalake import DeltaTable

_EXTENSIONS = Path(duckdb_ext.__path__[0]) / "extensions"


def duckdb_connection() -> duckdb.DuckDBPyConnection:
    """DuckDB with the delta extension from the duckdb-ext-delta wheel (nothing downloaded)."""
    connection = duckdb.connect(config={"extension_directory": str(_EXTENSIONS), "autoinstall_known_extensions": False})
    connection.execute("LOAD delta")
    return connection


def delta_with_duckdb(table_path) -> pd.DataFrame:
    return duckdb_connection().execute(f"SELECT * FROM delta_scan('{table_path}')").df()


def delta_with_delta_rs(table_path) -> pd.DataFrame:
    return DeltaTable(str(table_path)).to_pandas()


def delta_row_set(table_path) -> frozenset:
    """Every row of the Delta table as a set of sorted (column, value) tuples: equal sets,
    equal content, whatever the files and their order."""
    # One thread: a threaded delta-rs scan aborts the process at exit (see backfill/state/ledger.py).
    rows = DeltaTable(str(table_path)).to_pyarrow_dataset().to_table(use_threads=False).to_pylist()
    return frozenset(tuple(sorted(row.items())) for row in rows)


def parquet_with_duckdb(table_path) -> pd.DataFrame:
    return (
        duckdb_connection()
        .execute(
            f"SELECT * FROM read_parquet('{table_path}/**/*.parquet', hive_partitioning = true, "
            "hive_types_autocast = false)"
        )
        .df()
    )


def parquet_with_pyarrow(table_path) -> pd.DataFrame:
    dataset = ds.dataset(
        str(table_path),
        format="parquet",
        partitioning="hive",
        exclude_invalid_files=True,
        ignore_prefixes=["_", "."],
    )
    frame = dataset.to_table().to_pandas()
    return frame.astype({c: str for c in frame.columns if isinstance(frame[c].dtype, pd.CategoricalDtype)})


def canonical(frame: pd.DataFrame) -> list[tuple]:
    """Rows as sorted tuples of strings, columns by name: equal tables give equal lists."""
    frame = frame[sorted(frame.columns)].copy()
    for column in frame.columns:
        if pd.api.types.is_datetime64_any_dtype(frame[column]):
            frame[column] = pd.to_datetime(frame[column], utc=True)
        frame[column] = frame[column].map(_normal)
    return sorted(map(tuple, frame.values.tolist()))


def _normal(value) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "null"
    try:
        return repr(round(float(value), 6))
    except (TypeError, ValueError):
        return str(value)
