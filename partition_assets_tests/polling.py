"""Waiting in tests for something another process does."""

import time


def wait_for(condition, timeout: float, step: float = 0.1):
    """`condition()`'s first truthy value, polled every `step` seconds; TimeoutError after `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(step)
    raise TimeoutError(f"not within {timeout} s: {condition.__doc__ or condition}")
