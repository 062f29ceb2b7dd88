"""Starting a long-lived process that outlives its starter and stops on SIGTERM.

The Spark Connect server, a backfill's coordinator and a deploy's code server run in a
session of their own (a webserver restart or the end of the run that started them leaves
them running) and are stopped later by SIGTERM to their process group (`partition-assets
spark stop`, `undeploy`, a test's fixture). A child inherits the signals its parent
ignores, and the parent may ignore SIGTERM without knowing it: a command run in the
background of a non-interactive shell (`cmd &` in a script, CI) starts with SIGINT ignored,
and Dagster maps SIGTERM to SIGINT's disposition whenever it executes a job
(`dagster._utils.interrupts.setup_interrupt_handlers`). A JVM or Python process started from
there would ignore the SIGTERM meant to stop it, and every stop would wait for its timeout
before a SIGKILL that skips the process's own clean-up. `start_detached` gives the child
the default dispositions of SIGTERM and SIGINT, as a daemon starts with.

Not guaranteed: signals the child itself chooses to ignore or handle later; other inherited
state (the signal mask, open descriptors beyond those `subprocess` closes) is as Popen leaves it.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def start_detached(
    command: Sequence[str],
    *,
    env: Mapping[str, str],
    stdout: int | IO,
    stdin: int | IO = subprocess.DEVNULL,
    cwd: str | Path | None = None,
) -> subprocess.Popen:
    """`command` started in a session of its own, its standard error with `stdout`, with
    SIGTERM and SIGINT at their default dispositions whatever this process ignores.

    Args:
        command: the program and its arguments.
        env: the child's whole environment.
        stdout: where its output and errors go (a file or `subprocess.DEVNULL`).
        stdin: its standard input (`subprocess.PIPE` to write to it).
        cwd: its working directory (this process's when None).

    Returns:
        The started process; nobody waits for it but the caller.
    """
    return subprocess.Popen(
        list(command),
        env=dict(env),
        cwd=cwd,
        stdin=stdin,
        stdout=stdout,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        # Runs in the child between fork and exec; signal() takes no lock that another
        # thread of this process could have held at the fork.
        preexec_fn=_default_stop_signals,
    )


def _default_stop_signals() -> None:
    for stop_signal in _STOP_SIGNALS:
        signal.signal(stop_signal, signal.SIG_DFL)
