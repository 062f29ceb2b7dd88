"""Where a command's progress goes while it runs: one output interface for every surface.

A command that takes time (run, resume, retry, adopt) reports each node's result (`node`:
its line and where the backfill stands) and each phase (gate, approval, publish) as a line
(`line`) to the `Console` its caller passes in; what it
ends with is its return value (commands/results.py), which the caller renders. The command
line passes a console that prints (cli/backfill.py), the Launchpad's jobs one that logs to
the run (automation/operations.py); nothing in a command prints or captures stdout.

Not guaranteed: a console is called from the coordinator's thread only, one line at a
time; a line may hold several lines of text (a plan's schema change), joined by newlines.
"""

from __future__ import annotations

from typing import Protocol

from partition_assets.backfill.running.progress import Tally


class Console(Protocol):
    """Receives the lines a command reports while it runs."""

    def line(self, text: str) -> None:
        """Shows `text` (one or more lines) now."""

    def node(self, text: str, tally: Tally) -> None:
        """A node finished: `text` is its line (Progress.line), `tally` where the backfill stands."""


class SilentConsole:
    """A console that shows nothing: for callers that read only a command's result."""

    def line(self, text: str) -> None:
        """Drops `text`."""

    def node(self, text: str, tally: Tally) -> None:
        """Drops `text`."""


class PrintingConsole:
    """A console that prints each line to stdout as it comes: a script's default."""

    def line(self, text: str) -> None:
        """Prints `text` now."""
        print(text, flush=True)

    def node(self, text: str, tally: Tally) -> None:
        """Prints the node's line."""
        self.line(text)
