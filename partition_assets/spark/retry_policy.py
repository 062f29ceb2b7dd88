"""The retry policy of every Spark Connect session `SparkResource` opens: Spark's own, within
a deadline (see spark/unreachable.py). A module of its own: importing Spark Connect's client
imports grpc and pandas, which only a process that opens a Connect session needs.
"""

from __future__ import annotations

import time

from pyspark.sql.connect.client.retries import DefaultPolicy, RetryPolicyState


class UnreachableFor(DefaultPolicy):
    """Spark Connect's DefaultPolicy (what it retries, and its backoff), cut off `seconds`
    after a call's first retryable failure: that call then raises the failure."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds

    def to_state(self) -> RetryPolicyState:
        """The state of one call's retries (the client asks for one per call)."""
        return _RetriesOfOneCall(self, self.seconds)


class _RetriesOfOneCall(RetryPolicyState):
    def __init__(self, policy: DefaultPolicy, seconds: float) -> None:
        super().__init__(policy)
        self._seconds = seconds
        self._deadline: float | None = None

    def next_attempt(self, exception: BaseException | None = None) -> int | None:
        """Milliseconds to wait before the next attempt, within the deadline; None: give up."""
        now = time.monotonic()
        if self._deadline is None:  # the call's first retryable failure
            self._deadline = now + self._seconds
        wait = super().next_attempt(exception)
        left_ms = (self._deadline - now) * 1000
        if wait is None or left_ms < 1:  # less than a millisecond left: no attempt would fit
            return None
        return int(min(wait, left_ms))
