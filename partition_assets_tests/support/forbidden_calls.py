"""Calls a test forbids: the planner's entry points and git, where a command must read what a
backfill's record stores (backfill/state/stored_plan.py) rather than plan again.

Not guaranteed: a planner function bound under another name than its own, or git started other
than through `subprocess.Popen` (os.exec*, a shell line naming it later than first).
"""

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from partition_assets.backfill.planning import graph, history, instance_state

PLANNER = (graph.plan, graph.build_graph, history.plan_by_history, instance_state.graph_of)


class ForbiddenCallError(AssertionError):
    """A planner entry point or git was called where the stored plan must do."""


def forbid_planner_and_git(monkeypatch: pytest.MonkeyPatch) -> Counter:
    """Every binding of a planner entry point in partition_assets' modules, and git's
    subprocess, made to raise ForbiddenCallError; the calls they met, counted by name."""
    calls: Counter = Counter()

    def forbidden(name: str):
        def call(*args, **kwargs):
            calls[name] += 1
            raise ForbiddenCallError(f"{name} was called")

        return call

    for module in [m for name, m in sys.modules.items() if name.startswith("partition_assets.") and m is not None]:
        for attribute, value in list(vars(module).items()):
            if any(value is function for function in PLANNER):
                monkeypatch.setattr(module, attribute, forbidden(value.__name__))
    real_init = subprocess.Popen.__init__

    def popen(self, args, *rest, **kwargs):
        program = args[0] if isinstance(args, list | tuple) else str(args).split()[0]
        if Path(str(program)).name == "git":
            forbidden("git")()
        real_init(self, args, *rest, **kwargs)

    monkeypatch.setattr(subprocess.Popen, "__init__", popen)
    return calls
