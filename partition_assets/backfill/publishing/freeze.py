"""Freezing the assets of a running backfill, so that automation leaves them alone.

While a backfill rewrites an asset, a sensor must not launch a run writing it (it
would race the backfill's lease) nor, for the eager sensor, a run reading it (the
inputs are about to change). The freeze lives in the Dagster instance's key-value
store (`run_storage.get_cursor_values` / `set_cursor_values`, the daemon cursor
storage every run storage implements), so every process of the deployment sees
it: the sensor daemon, the webserver, a consumer's script.

Layout: `partition_assets/frozen/<backfill_id>` holds the JSON list of the
backfill's frozen assets ("[]" once unfrozen: the store cannot delete), and
`partition_assets/frozen` the JSON list of the backfills that may hold a freeze.

A backfill's coordinator freezes its assets while it holds the backfill, and the
freeze counts only while that coordinator is live (backfill/state/presence.py): one killed
before lifting it freezes nothing once its heartbeat is older than the lease TTL, and
cancel and discard lift it at once. A freeze set by a direct call of `freeze`, outside
any coordinator, counts until `unfreeze`.

The list of backfills changes by compare-and-set (dagster_instance/key_values.py): a
change replaces only the list it read, else reads the list again and applies itself to
that, so two processes changing it at once both land.

Not guaranteed: a freeze is a signal to automation, not a lock: leases guard the data.
"""

import json
from collections.abc import Callable, Iterable

import dagster as dg

from partition_assets.backfill.state.presence import stopped_coordinators
from partition_assets.dagster_instance.key_values import swap, value_of

INDEX_KEY = "partition_assets/frozen"


def _backfill_key(backfill_id: str) -> str:
    return f"{INDEX_KEY}/{backfill_id}"


def freeze(instance: dg.DagsterInstance, assets: Iterable[dg.AssetKey], backfill_id: str) -> None:
    """Marks `assets` as being rewritten by `backfill_id` (again: replaces its frozen assets)."""
    names = sorted({key.to_user_string() for key in assets})
    instance.run_storage.set_cursor_values({_backfill_key(backfill_id): json.dumps(names)})
    _update_index(instance, lambda ids: ids | {backfill_id})


def unfreeze(instance: dg.DagsterInstance, backfill_id: str) -> None:
    """Lifts `backfill_id`'s freeze; other backfills' frozen assets stay frozen."""
    instance.run_storage.set_cursor_values({_backfill_key(backfill_id): "[]"})
    _update_index(instance, lambda ids: ids - {backfill_id})


def frozen_assets(instance: dg.DagsterInstance) -> dict[dg.AssetKey, str]:
    """Every frozen asset with the backfill freezing it (the first by id when several do).
    A freeze whose backfill's coordinator is no longer live (killed, or stopped without
    lifting it) is ignored: only a live backfill is rewriting its assets."""
    index = _index(instance)
    ids = sorted(index - stopped_coordinators(instance, index))
    if not ids:
        return {}
    values = instance.run_storage.get_cursor_values({_backfill_key(backfill_id) for backfill_id in ids})
    frozen: dict[dg.AssetKey, str] = {}
    for backfill_id in ids:
        for name in json.loads(values.get(_backfill_key(backfill_id), "[]")):
            frozen.setdefault(dg.AssetKey.from_user_string(name), backfill_id)
    return frozen


def is_frozen(instance: dg.DagsterInstance, asset_key: dg.AssetKey) -> str | None:
    """The id of a backfill freezing `asset_key`, or None."""
    return frozen_assets(instance).get(asset_key)


def _index(instance: dg.DagsterInstance) -> set[str]:
    return _ids(value_of(instance, INDEX_KEY))


def _ids(text: str | None) -> set[str]:
    return set(json.loads(text)) if text else set()


def _update_index(instance: dg.DagsterInstance, change: Callable[[set[str]], set[str]]) -> None:
    """Applies `change` to the list of freezing backfills, to the list another writer left
    when it changed meanwhile."""
    while True:
        text = value_of(instance, INDEX_KEY)
        ids = _ids(text)
        changed = change(ids)
        if changed == ids or swap(instance, INDEX_KEY, text, json.dumps(sorted(changed))):
            return
