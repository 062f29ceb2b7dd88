"""Wall seconds per named part of a step, for the line that reports the step: a part timed
twice (the ledger's read and its write) adds up.

Not guaranteed: the seconds are wall time of this process, waits for a busy CPU included.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager


class StepClock:
    """`with clock.step("name"): ...` adds the block's wall seconds to `seconds["name"]`."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        started = time.monotonic()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.monotonic() - started

    def describe(self) -> str:
        """`table commits 1.2 s, ledger 0.3 s` in the order the parts first ran."""
        return ", ".join(f"{name} {seconds:.1f} s" for name, seconds in self.seconds.items())
