"""The Dagster beta APIs this library calls on purpose, called without their warnings.

Dagster warns (BetaWarning, PreviewWarning) on every call of a beta API. The calls this
library makes itself are no choice of its user's, and their warnings buried a command's
answer under dozens of lines: `allow_nonexistent_upstream_partitions` and the
multi-partition mappings of partitions/mappings.py, `backfill_policy` on the example's
assets, the `include_sources=` Dagster's own selection parser passes (`asset_selection`),
the sensor `owners` Dagster passes on (as []) when it binds resources to a sensor's job
while resolving definitions (code_location.resolved). `quiet_dagster_betas()` ignores
those two categories for exactly the calls it wraps; a beta API called by a user's own
code, outside it, warns as Dagster made it.

Not guaranteed: Python's warning filters are process-wide, so while a wrapped call runs,
a beta warning another thread raises at that moment is ignored too; and a beta API that a
wrapped call reaches only after a Dagster upgrade is quiet as well, though nobody chose it.
"""

import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import dagster as dg

# `catch_warnings` saves the process-wide filters and restores them on exit: two threads'
# blocks interleaving would leave one's "ignore" installed for good, so blocks take turns.
_filters_lock = threading.RLock()


@contextmanager
def quiet_dagster_betas() -> Iterator[None]:
    """Ignores Dagster's BetaWarning and PreviewWarning raised inside the block."""
    with _filters_lock, warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.BetaWarning)
        warnings.simplefilter("ignore", dg.PreviewWarning)
        yield


def asset_selection(selection: str) -> dg.AssetSelection:
    """`dg.AssetSelection.from_string(selection)`, without the warnings its parser raises by
    passing the beta `include_sources=` itself (for `group:`, `tag:`, `*`, `not`, ...)."""
    with quiet_dagster_betas():
        return dg.AssetSelection.from_string(selection)
