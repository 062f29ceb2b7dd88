"""The workers' fork server (partition_assets/processes/fork_server.py): `backfill run` makes
a fork of itself the server once it loaded the code location, so the workers start with
what it loaded and nothing is imported again; a process running other threads starts
multiprocessing's own server instead; so does the webserver's standby coordinator. The server
holds none of the instance's database files open (dagster_instance/storage.py closes them before a fork).

Runs real processes: a script loads a code location, starts the fork server, and has a
worker of a forkserver pool report what it found. Pins multiprocessing's private
`forkserver._forkserver` fields and `forkserver.main`, which `fork_here` drives."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from partition_assets.backfill.planning.spec import DEFAULT_MAX_PARALLEL
from partition_assets_tests.support import REPO
from partition_assets_tests.support.cli_runs import CLI
from partition_assets_tests.support.instances import add_to_config, instance_env

# Loads the code location, marks this process (after its imports: only a fork of it can
# see the mark), optionally starts a thread, starts the fork server; then a pool worker
# reports what it sees, and the script what it knows of the server.
SCRIPT = textwrap.dedent(
    """
    import json, multiprocessing, os, sys, threading, time
    from concurrent.futures import ProcessPoolExecutor
    from partition_assets.backfill.running import local_workers

    # Evaluated in the worker: a function of this script would not unpickle in a worker of a
    # fresh interpreter (a `-c` script has no module to import it from).
    SEEN = (
        "{'mark': getattr(__import__('sys'), 'fork_server_test_mark', None),"
        " 'fork_server': __import__('os').getppid(),"
        " 'location_loaded': 'partition_assets_tests.support.locations.engine_defs' in __import__('sys').modules}"
    )

    def command_of(pid):
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return cmdline.read().decode().replace("\\0", " ")

    if __name__ == "__main__":
        sys.fork_server_test_mark = "set after the imports"
        if sys.argv[1] == "with_a_thread":
            threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
        local_workers.start_fork_server(["partition_assets_tests.support.locations.engine_defs"])
        server = multiprocessing.forkserver._forkserver._forkserver_pid
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("forkserver")) as pool:
            worker = pool.submit(eval, SEEN).result()
        report = {"server": server, "server_command": command_of(server), "own_command": command_of(os.getpid())}
        print(json.dumps({**report, "worker": worker}))
    """
)


def _report(mode: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, mode], cwd=REPO, capture_output=True, text=True, timeout=120, check=True
    )
    return json.loads(done.stdout.splitlines()[-1])


def test_the_fork_server_is_a_fork_of_the_command_and_its_workers_start_with_the_location_loaded():
    report = _report("alone")
    assert report["server_command"] == report["own_command"]  # a fork, not a fresh interpreter
    assert report["worker"] == {
        "mark": "set after the imports",  # the command's own state, as it was when it forked
        "fork_server": report["server"],
        "location_loaded": True,
    }


def test_a_process_running_other_threads_starts_multiprocessing_s_fork_server_instead():
    report = _report("with_a_thread")
    assert report["server_command"] != report["own_command"]
    assert "from multiprocessing.forkserver import main" in report["server_command"]
    assert "partition_assets_tests.support.locations.engine_defs" in report["server_command"]  # preloaded there instead
    assert report["worker"] == {"mark": None, "fork_server": report["server"], "location_loaded": True}


def test_the_webservers_standby_forks_its_workers_from_a_fork_of_itself(tmp_path):
    home = tmp_path / "home"
    env = {**os.environ, **instance_env(home)}
    add_to_config(home, partition_assets={"engine_modules": ["partition_assets_tests.support.locations.engine_defs"]})
    standby = subprocess.Popen(
        [*CLI, "backfill", "standby"], cwd=REPO, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert standby.stdout.readline().startswith(f"standby {standby.pid} ready")  # its workers loaded
        (server,) = _children(standby.pid)
        assert _command(server) == _command(standby.pid)  # a fork, not a fresh interpreter
        assert len(_children(server)) == DEFAULT_MAX_PARALLEL
    finally:
        standby.stdin.close()  # as when its webserver is gone: it exits
        assert standby.wait(timeout=60) == 0


def _command(pid: int) -> bytes:
    return Path(f"/proc/{pid}/cmdline").read_bytes()


def _children(pid: int) -> list[int]:
    """`pid`'s child processes but multiprocessing's resource tracker."""
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            if b"resource_tracker" not in _command(int(child)):
                found.append(int(child))
    return found


# Opens the instance, starts the fork server with it, then a pool worker takes its instance
# as a backfill worker does and reads runs through it in its own process.
INHERITING_SCRIPT = textwrap.dedent(
    """
    import json, multiprocessing, sys
    from concurrent.futures import ProcessPoolExecutor
    import dagster as dg
    from partition_assets.backfill.running import local_workers

    TAKE = (
        "(lambda lw: (lw._worker.__setitem__('instance_ref', lw._worker['inherited_instance'].get_ref()),"
        " {'inherited': lw._instance() is lw._worker['inherited_instance'],"
        "  'runs': len(lw._instance().get_runs())})[1])"
        "(__import__('partition_assets.backfill.running.local_workers', fromlist=['_worker']))"
    )

    if __name__ == "__main__":
        with dg.DagsterInstance.get() as instance:
            instance.add_run(dg.DagsterRun(job_name="before_the_fork", run_id="r1"))
            local_workers.start_fork_server(["partition_assets_tests.support.locations.engine_defs"], instance)
            with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("forkserver")) as pool:
                print(json.dumps(pool.submit(eval, TAKE).result()))
    """
)


def test_workers_take_the_instance_the_fork_server_was_started_with_and_read_it_in_their_own_process(tmp_path):
    # Opening an instance costs a worker ~40 ms of CPU, all workers at once when the first runs start.
    env = {**os.environ, **instance_env(tmp_path / "home")}
    done = subprocess.run(
        [sys.executable, "-c", INHERITING_SCRIPT], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == {"inherited": True, "runs": 1}


# Starts the fork server while the instance's run storage holds its connection open; prints
# the database files the server has open.
HELD_FILES_SCRIPT = textwrap.dedent(
    """
    import json, os, dagster as dg
    from partition_assets.backfill.running import local_workers
    from partition_assets.processes.fork_server import running_pid

    if __name__ == "__main__":
        with dg.DagsterInstance.get() as instance:
            instance.add_run(dg.DagsterRun(job_name="before_the_fork", run_id="r1"))
            local_workers.start_fork_server(["partition_assets_tests.support.locations.engine_defs"], instance)
            server = running_pid()
            held = {os.readlink(f"/proc/{server}/fd/{fd}") for fd in os.listdir(f"/proc/{server}/fd")}
            print(json.dumps(sorted(path for path in held if ".db" in path)))
    """
)


def test_the_fork_server_holds_none_of_the_instances_database_files(tmp_path):
    # SQLite's state of a connection open across the fork (the file, its WAL index) lived on
    # in the server and in every worker forked from it, after the instance that opened it
    # closed: a second backfill of the process then overwrote runs.db's first page
    # (test_dagster_instance_storage.py `test_two_backfills_in_one_process_leave_the_runs_database_whole`).
    env = {**os.environ, **instance_env(tmp_path / "home")}
    done = subprocess.run(
        [sys.executable, "-c", HELD_FILES_SCRIPT], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == []
