"""Waiting in tests for something another process does.

Not guaranteed: that `condition` is polled at exactly `step` intervals (each call takes its own time).
"""

import subprocess
import time
from collections.abc import Sequence


def wait_for(condition, timeout: float, step: float = 0.1, alive: Sequence[subprocess.Popen] = ()):
    """`condition()`'s first truthy value, polled every `step` seconds; TimeoutError after
    `timeout`. A RuntimeError at once when one of the processes `alive` exits first: a server
    that died never makes the condition true."""
    deadline = time.monotonic() + timeout
    while True:
        found = condition()
        if found:
            return found
        exited = [process.args for process in alive if process.poll() is not None]
        if exited:
            raise RuntimeError(f"exited before {condition.__doc__ or condition}: {exited}")
        if time.monotonic() >= deadline:
            raise TimeoutError(f"not within {timeout} s: {condition.__doc__ or condition}")
        time.sleep(step)
