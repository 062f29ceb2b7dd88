"""Column types as Delta names them (long, integer, double, decimal(18,6), string, date,
timestamp, boolean): the logical types every format's schemas are compared in (a reader
reports strings as large or view types; the logical type is what a schema rule is about),
and the names an asset declares its columns' types by (`dagster/column_schema`).

Not guaranteed: nested types are compared as Delta maps them, field by field.
"""

from __future__ import annotations

import pyarrow as pa
from deltalake import Field, Schema
from deltalake.schema import PrimitiveType


def delta_type_name(arrow_type: pa.DataType) -> str:
    """The type as Delta names it (double, decimal(18,6), string)."""
    delta_field = Schema.from_arrow(pa.schema([("c", arrow_type)])).fields[0]
    return str(delta_field.type.type if hasattr(delta_field.type, "type") else delta_field.type)


def same_delta_type(one: pa.DataType, other: pa.DataType) -> bool:
    """Whether the two types are one logical (Delta) type."""
    return Schema.from_arrow(pa.schema([("c", one)])) == Schema.from_arrow(pa.schema([("c", other)]))


def arrow_type(name: str) -> pa.DataType:
    """The Arrow type of the Delta type `name` (a primitive: long, decimal(18,6), ...).

    Raises:
        ValueError: `name` is no Delta primitive type.
    """
    try:
        return pa.schema(Schema([Field("c", PrimitiveType(name), nullable=True)]).to_arrow()).field(0).type
    except Exception:  # delta-rs raises its own errors for an unknown name
        raise ValueError(f"{name!r} is no Delta type") from None
