"""One callable on the Definitions hears what happens to backfills (Slack, e-mail, a pager).

Configure it as a resource under the fixed key `backfill_notifications`, holding the
callable itself (a function, or an object with `__call__`, e.g. a ConfigurableResource
carrying a webhook URL):

    defs = dg.Definitions(assets=[...], resources={"backfill_notifications": post_to_slack})

Dagster accepts any plain object as a resource (it wraps it as a hardcoded resource
for runs, which never use it), and `Definitions.resources` keeps the object as given,
so the backfill commands find the callable where the code location declares it.

`notify` calls it with a `BackfillEvent` at each step of a backfill: started,
gate_failed, published, canceled, rolled_back, failed. Not guaranteed: delivery.
A hook that raises is logged and ignored, so a broken webhook never fails,
blocks or rolls back a backfill; the hook runs in the backfill's process, and a
slow hook delays it.
"""

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, cast

import dagster as dg

from partition_assets.errors import NotificationHookError

HOOK_RESOURCE_KEY = "backfill_notifications"
EventKind = Literal["started", "gate_failed", "published", "canceled", "rolled_back", "failed"]
NotificationHook = Callable[["BackfillEvent"], None]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BackfillEvent:
    """What happened to a backfill: its kind, id, assets and a human-readable detail."""

    kind: EventKind
    backfill_id: str
    assets: tuple[dg.AssetKey, ...]
    detail: str = ""

    def text(self, limit: int = 5) -> str:
        """One line for a chat message.

        Args:
            limit: How many assets to name before "and N more".
        """
        names = [key.to_user_string() for key in self.assets]
        shown = ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")
        return f"backfill {self.backfill_id} {self.kind.replace('_', ' ')} ({shown})" + (
            f": {self.detail}" if self.detail else ""
        )


def notification_hook(definitions: dg.Definitions) -> NotificationHook | None:
    """The callable under `backfill_notifications` in the Definitions' resources, or None.

    Raises:
        NotificationHookError: That resource is not a plain callable (e.g. a ResourceDefinition
            wrapping one: give the callable itself).
    """
    hook = (definitions.resources or {}).get(HOOK_RESOURCE_KEY)
    if hook is None:
        return None
    if isinstance(hook, dg.ResourceDefinition) or not callable(hook):
        raise NotificationHookError(
            f"resource {HOOK_RESOURCE_KEY!r} of the Definitions is {hook!r}, not a callable taking a BackfillEvent; "
            f'give the function itself: resources={{"{HOOK_RESOURCE_KEY}": my_function}}'
        )
    return cast(NotificationHook, hook)


def notify(definitions: dg.Definitions, event: BackfillEvent) -> bool:
    """Calls the Definitions' hook with `event`; True when it ran without raising.

    A hook that raises is logged (with its traceback) and swallowed: a broken Slack
    webhook must not fail a backfill. False too when no hook is configured.

    Raises:
        NotificationHookError: The resource under `backfill_notifications` is not a plain
            callable (see `notification_hook`); the hook is not called.
    """
    hook = notification_hook(definitions)
    if hook is None:
        return False
    try:
        hook(event)
    except Exception:
        log.exception("the backfill notification hook failed on %s; the backfill goes on", event.text())
        return False
    return True
