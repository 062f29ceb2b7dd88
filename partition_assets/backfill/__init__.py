"""The backfill engine: the spec, the sparse (asset, partition) graph and its scheduling loop;
the commands (`backfill.commands`); and what a code location declares for safe backfills.

This package exports only the last: gates (`backfill_gate`, `Budget`, `gate_checks`) and
approval (`backfill_approval`), the same objects as `partition_assets`'s (docs/reference/api.md,
"Safe backfills", lists exactly these). Everything else is imported from the module defining
it, e.g. `partition_assets.backfill.model.Node`: one import path per name.

Not guaranteed: the modules below this package may move between releases; these names stay.
"""

from partition_assets.lazy_names import exported_lazily

__all__ = [
    "Budget",
    "backfill_approval",
    "backfill_gate",
    "gate_checks",
]

# Each name is imported from its module when first read (lazy_names.py): a module below this
# package (the command line's flags read planning/spec.py) imports only what it needs.
_HOMES = {
    "partition_assets.backfill.dagster_ui.gate_asset_checks": ("gate_checks",),
    "partition_assets.backfill.planning.gate_rules": ("Budget", "backfill_gate"),
    "partition_assets.backfill.state.approval": ("backfill_approval",),
}
__getattr__, __dir__ = exported_lazily(__name__, _HOMES)
