"""Dagster's telemetry ids read once per process, not twice per node run.

With telemetry on (Dagster's default: a dagster.yaml without `telemetry: enabled: false`, or no
dagster.yaml), every run Dagster executes writes a line to `$DAGSTER_HOME/logs/event.log` at
each step's start and end (`log_dagster_event`). For each line it reads the instance's
telemetry id (`$DAGSTER_HOME/.telemetry/id.yaml`) and the user's
(`~/.dagster/.telemetry/user_id.yaml`), both YAML files parsed anew, and the run storage's id
(a transaction on the run storage: a connection and a round trip on Postgres): profiled on
Dagster's defaults, 2.7 s of the workers' wall time over the bench DAG's 125 node runs on a
loaded 2-core machine (~20 ms a node run); ~1.5 ms of CPU a node run once remembered.
The line written carries only those ids, the action and its time.

`remember_telemetry_ids()` has Dagster's `_get_instance_telemetry_info` (per instance) and
`get_or_set_user_id` give, from their second call in this process on, what they gave the
first time once it named the ids: the same lines written, with the same ids, on the same
settings. An answer without ids (telemetry off, or an id not written yet) is asked again next
time (the user id: one that is not a UUID, Dagster's placeholder when it could not write one).
Idempotent; forked processes inherit it (the engine's workers: `start_fork_server`).

Not guaranteed: an id file rewritten or deleted while a process runs (by hand: Dagster writes
each once) is not seen by that process until it restarts; the instance's `telemetry:` setting
is read when the instance is opened, as Dagster reads it. Relies on Dagster's
`dagster._core.telemetry._get_instance_telemetry_info` (that module, `dagster_telemetry` in the
seam) and the `get_or_set_user_id` that `dagster_shared.telemetry.log_telemetry_action` calls,
both looked up as module globals at each call (pinned by partition_assets_tests/integration/test_dagster_internals.py).
"""

import functools
import threading
import uuid
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING

import dagster_shared.telemetry as shared_telemetry

from partition_assets.dagster_internals import dagster_telemetry

if TYPE_CHECKING:
    from dagster import DagsterInstance

_lock = threading.Lock()
_REMEMBERED = "_partition_assets_remembered"  # marks a function of this module's


Ask = Callable[["DagsterInstance"], shared_telemetry.TelemetrySettings]


def _instance_telemetry_info_remembered(ask: Ask) -> Ask:
    """`ask` (Dagster's `_get_instance_telemetry_info`), its answer kept per instance once it
    names the instance's telemetry id."""
    answers: weakref.WeakKeyDictionary[DagsterInstance, shared_telemetry.TelemetrySettings] = (
        weakref.WeakKeyDictionary()
    )

    @functools.wraps(ask)
    def remembered(instance: "DagsterInstance") -> shared_telemetry.TelemetrySettings:
        with _lock:
            if instance in answers:
                return answers[instance]
        answer = ask(instance)
        if answer.instance_id:  # telemetry on, its ids written: they never change
            with _lock:
                answers[instance] = answer
        return answer

    setattr(remembered, _REMEMBERED, True)
    return remembered


def _user_id_remembered(ask: Callable[[], str]) -> Callable[[], str]:
    """`ask` (`get_or_set_user_id`), its answer kept once it is an id Dagster wrote."""
    answers: list[str] = []

    @functools.wraps(ask)
    def remembered() -> str:
        if answers:
            return answers[0]
        answer = ask()
        if _is_uuid(answer):  # the id Dagster wrote, not the placeholder it gives when it cannot
            answers[:] = [answer]
        return answer

    setattr(remembered, _REMEMBERED, True)
    return remembered


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


def remember_telemetry_ids() -> None:
    """Makes this process read Dagster's telemetry ids once (module docstring)."""
    # Module globals replaced for the process (setattr: type checkers see functions' names as fixed).
    for module, name, remember in (
        (dagster_telemetry, "_get_instance_telemetry_info", _instance_telemetry_info_remembered),
        (shared_telemetry, "get_or_set_user_id", _user_id_remembered),
    ):
        with _lock:
            ask = getattr(module, name)
            if not getattr(ask, _REMEMBERED, False):
                setattr(module, name, remember(ask))
