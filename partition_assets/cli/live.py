"""The console of a backfill run from a terminal: one progress line, redrawn in place.

On a terminal (stdout is a tty), a line per finished node would scroll what matters away: the
`LiveConsole` keeps one line, `done/total done, running, failed, ETA`, redrawn as each node
finishes, and prints above it what a person must read: failed nodes and every other line
(phases). Piped output (tests, CI, a log file) keeps a line per node (cli/backfill.py's
`TerminalConsole`); cli/backfill.py picks one by `sys.stdout.isatty()`.

Not guaranteed: a terminal that does not understand a carriage return and the erase-line
escape (`ESC[K`) shows the progress lines one after another.
"""

from typing import TextIO

from partition_assets.backfill.running.progress import Tally

# Back to the line's start, then erase it: the progress line is redrawn in place.
_ERASE_LINE = "\r\x1b[K"
_BAR_WIDTH = 20


class LiveConsole:
    """Writes to `stream` (a terminal) a live progress line, and above it, where they stay,
    each failed node's line and every other line; `close` erases the progress line, so that
    what the command prints last is on a line of its own."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._progress = ""  # the progress line shown, redrawn below each line printed
        self._failed = 0

    def line(self, text: str) -> None:
        self._write(f"{_ERASE_LINE}{text}\n{self._progress}")

    def node(self, text: str, tally: Tally) -> None:
        self._progress = progress_line(tally)
        if tally.failed > self._failed:  # this node failed: its line stays
            self._failed = tally.failed
            self.line(text)
        else:
            self._write(f"{_ERASE_LINE}{self._progress}")

    def close(self) -> None:
        if self._progress:
            self._write(_ERASE_LINE)
            self._progress = ""

    def _write(self, text: str) -> None:
        self._stream.write(text)
        self._stream.flush()


def progress_line(tally: Tally) -> str:
    """`[========>           ] 12/40 done, 4 running, 1 failed, ETA 2m05s`; `11/40 staged, 0
    published` (its succeeded nodes) for a staged backfill."""
    filled = _BAR_WIDTH * tally.done // tally.total if tally.total else _BAR_WIDTH
    bar = ("=" * filled + (">" if filled < _BAR_WIDTH else "")).ljust(_BAR_WIDTH)
    eta = "" if tally.eta_seconds is None else f", ETA {_duration(tally.eta_seconds)}"
    # A staged backfill's succeeded nodes are staged: it publishes them all at its end.
    done = (
        f"{tally.done - tally.failed}/{tally.total} staged, 0 published"
        if tally.staged
        else f"{tally.done}/{tally.total} done"
    )
    return f"[{bar}] {done}, {tally.running} running, {tally.failed} failed{eta}"


def _duration(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes}m{rest:02d}s" if minutes else f"{rest}s"
