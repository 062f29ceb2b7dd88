"""`partition-assets backfill serve` for tests and benchmarks: started from the repository's
root as `python -m partition_assets` (the import path of the commands `cli_runs` runs, so
the server takes them), its output collected line by line, stopped with SIGTERM; or the
probe server (support/probe_server.py), started likewise.

Not guaranteed: a server's start-up time (`backfill serve` imports Dagster and the engine,
2-4 s here; the probe server ~0.1 s).
"""

import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

from partition_assets_tests.support import REPO
from partition_assets_tests.support.cli_runs import CLI, start_cli
from partition_assets_tests.support.polling import wait_for


class ServerOutput:
    """What a running server printed so far, read by a thread of the test."""

    def __init__(self, process: subprocess.Popen):
        self.process = process
        self.lines: list[str] = []
        self._reading = threading.Thread(target=self._read, daemon=True)
        self._reading.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for_line(self, pattern: str, timeout: float = 120) -> re.Match:
        """The first line matching `pattern` (a regular expression), once printed."""

        def matched() -> re.Match | None:
            return next((m for m in map(re.compile(pattern).search, self.lines) if m), None)

        matched.__doc__ = f"the command server printed a line matching {pattern!r}"
        return wait_for(matched, timeout, alive=[self.process] if self.process.poll() is None else [])

    def forks(self) -> list[int]:
        """The pids of the processes the server forked to run commands, in order."""
        return [int(m.group(1)) for m in map(re.compile(r"process (\d+) runs ").search, self.lines) if m]


@contextmanager
def command_server(env: Mapping[str, str], probe: bool = False, program: Sequence[str] = CLI) -> Iterator[ServerOutput]:
    """A command server for the instance of `env`'s DAGSTER_HOME, listening once the block
    starts; stopped (SIGTERM) when it ends; started as `program` (cli_runs.CONSOLE_SCRIPT: the
    console script). With `probe`, the probe server, whose one command is `backfill probe FILE`."""
    if probe:
        process = subprocess.Popen(
            [sys.executable, "-m", "partition_assets_tests.support.probe_server"],
            cwd=REPO, env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True,
        )  # fmt: skip
    else:
        process = start_cli(
            "backfill", "serve", env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, program=program
        )
    output = ServerOutput(process)
    try:
        output.wait_for_line(r"command server \d+ serving")
        yield output
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        process.wait(30)
