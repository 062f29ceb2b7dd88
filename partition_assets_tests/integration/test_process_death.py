"""`die_with_parent` (partition_assets/processes/process_death.py) on real processes: the kernel kills
the process when its parent is killed, also when the parent was gone before it asked, and
leaves alone a detached process it started (as a run's Spark Connect server is)."""

import os
import signal
import subprocess
import sys
import textwrap

from partition_assets_tests.support import REPO
from partition_assets_tests.support.polling import wait_for

# Started by PARENT: asks to die with it, starts a detached process (its own session, as
# spark/connect_server.py starts the server), prints both pids, then waits forever.
CHILD = textwrap.dedent(
    """
    import os, subprocess, sys, time
    from partition_assets.processes.process_death import die_with_parent
    die_with_parent(int(sys.argv[1]))
    detached = subprocess.Popen(["sleep", "300"], start_new_session=True)
    print(os.getpid(), detached.pid, flush=True)
    time.sleep(300)
    """
)
PARENT = textwrap.dedent(
    """
    import os, subprocess, sys, time
    subprocess.Popen([sys.executable, "-c", sys.argv[1], str(os.getpid())])
    time.sleep(300)
    """
)
# A parent that is gone before its child asks to die with it: the child waits until it is
# handed to another process, then asks.
ORPHAN = textwrap.dedent(
    """
    import os, subprocess, sys, time
    if len(sys.argv) > 2:
        parent = int(sys.argv[2])
        print("waiting", flush=True)
        while os.getppid() == parent:
            time.sleep(0.01)
        from partition_assets.processes.process_death import die_with_parent
        die_with_parent(parent)
        print("survived", flush=True)
    else:
        subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[1], str(os.getpid())])
    """
)


def _running(pid: int) -> bool:
    """Whether `pid` runs (a zombie does not: it awaits reaping by whoever adopted it)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_process_dies_with_its_killed_parent_and_a_detached_process_it_started_lives_on():
    with subprocess.Popen([sys.executable, "-c", PARENT, CHILD], cwd=REPO, stdout=subprocess.PIPE, text=True) as parent:
        assert parent.stdout is not None
        child, detached = map(int, parent.stdout.readline().split())
        try:
            parent.kill()
            parent.wait()
            wait_for(lambda: not _running(child), timeout=30)
            assert _running(detached)
        finally:
            for pid in (child, detached):
                if _running(pid):
                    os.kill(pid, signal.SIGKILL)


def test_a_process_whose_parent_was_already_gone_is_killed_at_once():
    done = subprocess.run(
        [sys.executable, "-c", ORPHAN, ORPHAN], cwd=REPO, capture_output=True, text=True, timeout=60, check=True
    )
    # Read once the child closed its output: it ended without surviving its request.
    assert done.stdout.splitlines() == ["waiting"], done.stderr
