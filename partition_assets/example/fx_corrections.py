"""Corrects a published FX rate in place, outside Dagster's runs, as a finance team would:

    python -m partition_assets.example.fx_corrections 2024-01-03 eur 0.95 [--lake PATH]

One delta-rs commit updates the `fx_rates` rows of that day and currency; nothing else
changes. Assets reading `fx_rates` then compute other numbers on a re-run, unless the
re-run pins its inputs (`partition-assets backfill run --inputs-as-of original`).
"""

from __future__ import annotations

import argparse
import sys
from datetime import date

import pyarrow.compute as pc
from deltalake import CommitProperties, DeltaTable
from deltalake.exceptions import TableNotFoundError as DeltaTableNotFoundError

from partition_assets import PartitionAssetsError, TableNotFoundError, lake_root
from partition_assets.example.sources import CURRENCIES


def correct_rate(lake: str, day: str, currency: str, units_per_usd: float) -> int:
    """Sets `currency`'s rate on `day` in the lake's fx_rates table in one commit; returns
    the new table version. TableNotFoundError when the table or that day's row is missing."""
    uri = f"{lake.rstrip('/')}/fx_rates"
    try:
        table = DeltaTable(uri)
    except DeltaTableNotFoundError:
        table = None
    row = (pc.field("ds") == day) & (pc.field("currency") == currency)
    if table is None or table.to_pyarrow_dataset().to_table(filter=row, use_threads=False).num_rows == 0:
        raise TableNotFoundError(
            f"no {currency} rate for {day} in {uri}: materialize fx_rates for {day} first; nothing was changed"
        )
    table.update(
        updates={"units_per_usd": repr(float(units_per_usd))},
        predicate=f"ds = '{day}' AND currency = '{currency}'",
        commit_properties=CommitProperties(custom_metadata={"corrected_by": "fx_corrections"}),
    )
    return table.version()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m partition_assets.example.fx_corrections")
    parser.add_argument("day", type=lambda text: date.fromisoformat(text).isoformat(), help="e.g. 2024-01-03")
    parser.add_argument("currency", choices=CURRENCIES)
    parser.add_argument("units_per_usd", type=float, help="the corrected rate, > 0")
    parser.add_argument("--lake", default=None, help="the lake (default: PARTITION_ASSETS_LAKE or ./.lake)")
    args = parser.parse_args(argv)
    if args.units_per_usd <= 0:
        parser.error(f"units_per_usd {args.units_per_usd} must be > 0")
    try:
        version = correct_rate(args.lake or lake_root(), args.day, args.currency, args.units_per_usd)
    except PartitionAssetsError as error:
        print(f"fx_corrections: {error}", file=sys.stderr)
        return 2
    print(f"fx_rates {args.day} {args.currency} = {args.units_per_usd} (table version {version})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
