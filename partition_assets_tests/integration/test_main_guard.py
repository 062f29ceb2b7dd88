"""A script running a backfill (the public API, docs/reference/api.md "Running backfills from
Python"): its workers import it again, as Python's multiprocessing does, so a call outside
`if __name__ == "__main__":` is refused by name, before anything is recorded or run
(partition_assets/processes/main_guard.py), rather than each node failing with
"BrokenProcessPool" (the worker importing the script ran it again and multiprocessing refused)."""

import subprocess
import sys

import dagster as dg

import partition_assets
from partition_assets_tests.support import REPO

# Top-level calls, a thread running (as a user's script may have): the workers then come from
# multiprocessing's own fork server, a fresh interpreter that imports the script again.
UNGUARDED = """\
import threading

import dagster as dg

import partition_assets

threading.Thread(target=threading.Event().wait, daemon=True).start()
location = "partition_assets_tests.support.locations.user_projects.wired_visits"
spec = partition_assets.BackfillSpec(module=location, selection="*", start="2024-01-02", end="2024-01-03")
with dg.DagsterInstance.get() as instance:
    print(partition_assets.run_backfill(spec, instance, partition_assets.PrintingConsole()).message)
"""


def test_a_script_calling_run_backfill_outside_its_main_guard_is_refused_by_name_and_runs_nothing(home, tmp_path):
    script = tmp_path / "backfill_visits.py"
    script.write_text(UNGUARDED)
    ran = subprocess.run([sys.executable, str(script)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert ran.returncode == 1, ran.stdout + ran.stderr
    last = ran.stderr.strip().splitlines()[-1]
    assert last == (
        f"partition_assets.errors.UnguardedScriptError: run_backfill is called at line 11 of {script}, outside "
        "`if __name__ == \"__main__\":`: the backfill's worker processes import your script again, as Python's "
        'multiprocessing does, and would each run it. Put the calls under `if __name__ == "__main__":`. '
        "Nothing was recorded or run."
    ), ran.stderr
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert instance.get_runs() == []
        assert partition_assets.list_backfills(instance).standings == ()
