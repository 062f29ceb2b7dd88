"""An engine backfill whose coordinator died, as the webserver's backfill page shows it:
still in progress, with an error text saying that its coordinator fell silent and the
command that takes it over (backfill/state/liveness.py). The instance class adds it as
it reads the backfill (instance/engine_instance.py); nothing is written.

Not guaranteed: the Backfills list shows the status alone; the text is on the backfill's
own page.
"""

import dagster as dg

from partition_assets.backfill.state.liveness import silent_coordinator
from partition_assets.backfill.state.presence import silent_coordinators
from partition_assets.backfill.state.store import BackfillStore
from partition_assets.dagster_internals import PartitionBackfill, SerializableErrorInfo
from partition_assets.errors import UnknownBackfillError


def shown_with_silence(instance: dg.DagsterInstance, backfill: PartitionBackfill) -> PartitionBackfill:
    """`backfill` (an engine backfill in progress) with the silent coordinator's line as its
    error when its coordinator died; as it is otherwise. One key-value read when it did not."""
    backfill_id = backfill.backfill_id
    if backfill_id not in silent_coordinators(instance, [backfill_id]):
        return backfill
    store = BackfillStore(instance)
    try:
        line = silent_coordinator(instance, backfill_id, store.status(backfill_id))
    except UnknownBackfillError:  # adopted from the UI, died before recording it
        return backfill
    if line is None:
        return backfill
    return backfill.with_error(SerializableErrorInfo(message=line, stack=[], cls_name=None))
