"""A package's public names imported from their modules the first time each is read (PEP 562).

A package whose `__init__` imported every module it re-exports made any import of one of its
modules pay for all of them: `import partition_assets.backfill.planning.spec` (the command
line's flags) imported the whole engine, Dagster and Spark with it. A package that calls
`exported_lazily` imports nothing until a name is read, and a module below it only what it
imports itself.

    __getattr__, __dir__ = exported_lazily(__name__, {"partition_assets.spark.resource": ("SparkResource",)})

Not guaranteed: a type checker sees the names only when the package also imports them under
`if TYPE_CHECKING:`; an unknown name raises AttributeError as a module's attribute would.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def exported_lazily(
    package: str, homes: Mapping[str, Sequence[str]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The `__getattr__` and `__dir__` of `package`, whose names `homes` maps from each module
    defining them: a name is imported from its module when first read, then kept in the package."""
    home_of = {name: module for module, names in homes.items() for name in names}

    def __getattr__(name: str) -> Any:
        home = home_of.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        setattr(sys.modules[package], name, value)  # read once: later reads skip this function
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *home_of})

    return __getattr__, __dir__
