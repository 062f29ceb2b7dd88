"""Who executes a Dagster backfill, and what Dagster's backfill daemon is shown of them.

Contract:
- The tag `partition_assets/engine` on a Dagster backfill names its executor: `sparse`,
  the engine (`runs_on_engine`); `dagster` (set at launch, a tag in the dialog), Dagster's
  own daemon. An untagged asset backfill of an engine code location is tagged `sparse`
  when the webserver launches it (instance/engine_instance.py).
- `shown_to(backfills, caller)` is what the instance's `get_backfills` returns to the
  function `caller` (a frame): all of `backfills`, except to Dagster's backfill daemon
  (`dagster._daemon.backfill`), which is never shown the engine's, so it never executes
  or cancels them. Every other caller (the webserver's Backfills page, sensors) sees all.

Not guaranteed: which caller is the daemon is read from the calling module's name;
`partition_assets_tests/integration/test_dagster_internals.py` pins it against the installed Dagster.
Imports only Dagster: every process of the instance (webserver, daemon, run workers)
loads it.
"""

from collections.abc import Sequence
from types import FrameType

from partition_assets.dagster_internals import PartitionBackfill

# On a Dagster backfill: who executes it.
ENGINE_TAG = "partition_assets/engine"
SPARSE, DAGSTER = "sparse", "dagster"
# The module whose `get_backfills` calls are Dagster's backfill daemon.
BACKFILL_DAEMON_MODULE = "dagster._daemon.backfill"


def runs_on_engine(backfill: PartitionBackfill) -> bool:
    """Whether the sparse engine (not Dagster's daemon) executes `backfill`."""
    return backfill.tags.get(ENGINE_TAG) == SPARSE


def shown_to(backfills: Sequence[PartitionBackfill], caller: FrameType) -> Sequence[PartitionBackfill]:
    """`backfills` as the code of frame `caller` may see them: without the engine's when it
    is Dagster's backfill daemon."""
    if caller.f_globals.get("__name__") == BACKFILL_DAEMON_MODULE:
        return [backfill for backfill in backfills if not runs_on_engine(backfill)]
    return backfills
