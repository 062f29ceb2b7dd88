"""`exit_now`: a process ends with its exit code once its exit handlers ran, its fork
server already gone, without tearing down its modules (partition_assets/processes/quick_exit.py).

Pins multiprocessing's private fork server handle (`_forkserver._forkserver_pid`, `_stop`):
a Python upgrade that changes it fails here."""

import subprocess
import sys
import textwrap

from partition_assets_tests.support import REPO

SCRIPT = textwrap.dedent(
    """
    import atexit, multiprocessing.forkserver, os, sys
    from partition_assets.processes.quick_exit import exit_now


    class Teardown:
        def __del__(self):
            os.write(1, b"module teardown\\n")


    kept = Teardown()  # a module global: only module teardown frees it


    def report(fork_server):
        try:
            os.kill(fork_server, 0)
            os.write(1, b"exit handler ran, fork server alive\\n")
        except ProcessLookupError:
            os.write(1, b"exit handler ran, fork server gone\\n")


    if __name__ == "__main__":
        multiprocessing.forkserver.ensure_running()
        atexit.register(report, multiprocessing.forkserver._forkserver._forkserver_pid)
        if sys.argv[1] == "exit_now":
            exit_now(3)
        sys.exit(3)
    """
)


def _run(how: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, how], cwd=REPO, capture_output=True, text=True, timeout=60, check=False
    )


def test_exit_now_kills_the_fork_server_runs_exit_handlers_and_skips_module_teardown():
    ended = _run("exit_now")
    assert ended.returncode == 3, ended.stderr
    assert ended.stdout.splitlines() == ["exit handler ran, fork server gone"]


def test_a_normal_exit_tears_down_modules_with_its_fork_server_still_running():
    # The same script ended by sys.exit: what exit_now saves (and proof the probes work).
    ended = _run("sys.exit")
    assert ended.returncode == 3, ended.stderr
    assert ended.stdout.splitlines() == ["exit handler ran, fork server alive", "module teardown"]
