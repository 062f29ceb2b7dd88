"""Long-lived processes the library starts (the Spark Connect server, a coordinator, a
deploy's code server) stop on SIGTERM even when the process that started them ignores it
(partition_assets/processes/detached.py)."""

import os
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

from partition_assets.processes.detached import start_detached

SLEEPER = ["sleep", "600"]


@contextmanager
def stop_signals_ignored() -> Iterator[None]:
    """This process ignores SIGTERM and SIGINT meanwhile, as a backgrounded command does
    once Dagster has copied SIGINT's disposition to SIGTERM."""
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def ignores(pid: int, sig: int) -> bool:
    """Whether process `pid` ignores `sig`, from its SigIgn mask."""
    with open(f"/proc/{pid}/status") as status:
        mask = next(int(line.split()[1], 16) for line in status if line.startswith("SigIgn:"))
    return bool(mask >> (sig - 1) & 1)


def test_a_detached_process_stops_on_sigterm_though_its_starter_ignores_it():
    with stop_signals_ignored():
        plain = subprocess.Popen(SLEEPER, start_new_session=True)
        detached = start_detached(SLEEPER, env=os.environ, stdout=subprocess.DEVNULL)
    try:
        # What start_detached prevents: a plain child inherits the ignored signals.
        assert ignores(plain.pid, signal.SIGTERM) and ignores(plain.pid, signal.SIGINT)
        assert not ignores(detached.pid, signal.SIGTERM) and not ignores(detached.pid, signal.SIGINT)
        assert os.getsid(detached.pid) == detached.pid  # a session of its own

        os.killpg(detached.pid, signal.SIGTERM)
        assert detached.wait(timeout=30) == -signal.SIGTERM
    finally:
        for process in (plain, detached):
            if process.poll() is None:
                process.kill()
                process.wait()
