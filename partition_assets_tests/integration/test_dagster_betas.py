"""The library's own calls of Dagster beta APIs warn nothing (partition_assets/dagster_betas.py):
a command's answer is all it prints; a beta API a user's own code calls still warns."""

import os
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import dagster as dg
import pytest

from partition_assets.backfill.planning.spec import BackfillSpec
from partition_assets.backfill.state.record import BackfillRecord
from partition_assets.backfill.state.store import BackfillStore
from partition_assets.dagster_betas import quiet_dagster_betas
from partition_assets_tests.support.instances import instance_env, open_instance

REPO = Path(__file__).resolve().parents[1]
# The installed command, as a user runs it.
STATUS = [str(Path(sys.executable).parent / "partition-assets"), "backfill", "status"]
JANUARY = {"start": "2024-01-01", "end": "2024-01-02"}

# A user's code location: its own beta call (`backfill_policy`), and a library mapping that
# calls one (`allow_nonexistent_upstream_partitions`) on the user's behalf.
USER_LOCATION = """\
import dagster as dg

from partition_assets.partitions import daily, mappings

DAYS = daily("2024-01-01")


@dg.asset(partitions_def=DAYS)
def raw() -> None: ...


@dg.asset(
    partitions_def=DAYS,
    backfill_policy=dg.BackfillPolicy.single_run(),
    deps=[dg.AssetDep(raw, partition_mapping=mappings.rolling_window(3))],
)
def rolling() -> None: ...


defs = dg.Definitions(assets=[raw, rolling])
"""

pytestmark = pytest.mark.slow


@pytest.fixture
def env(tmp_path) -> dict[str, str]:
    """A DAGSTER_HOME with a backfill of the example (`example0`) and one of a user's code
    location (`user0`) recorded; the environment of a user's shell (Python's default filters)."""
    user_location = tmp_path / "user_location.py"
    user_location.write_text(USER_LOCATION)
    home_env = instance_env(tmp_path / "dagster_home")
    with open_instance(home_env) as instance:
        store = BackfillStore(instance)
        BackfillRecord(
            BackfillSpec(module="partition_assets.example", selection="key:daily_orders", **JANUARY),
            id="example0",
            store=store,
        ).save()
        BackfillRecord(
            BackfillSpec(module=str(user_location), selection="key:rolling", **JANUARY), id="user0", store=store
        ).save()
    environment = {name: value for name, value in os.environ.items() if name != "PYTHONWARNINGS"}
    return {**environment, **home_env}


def status(env: dict[str, str], backfill_id: str) -> subprocess.CompletedProcess:
    return subprocess.run([*STATUS, backfill_id], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)


def test_backfill_status_of_the_example_prints_its_answer_and_nothing_else(env):
    done = status(env, "example0")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert done.stdout.splitlines()[0] == "backfill example0 (running): key:daily_orders 2024-01-01..2024-01-02"
    # Title, legend, the asset's row, and why it runs 3 at a time (the repo's run queue of 4, one kept free).
    assert len(done.stdout.splitlines()) == 4, done.stdout
    assert done.stdout.splitlines()[3].startswith("runs at most 3 at a time, not --max-parallel 4: "), done.stdout


def test_a_users_own_beta_call_still_warns_and_the_librarys_on_its_behalf_does_not(env):
    done = status(env, "user0")
    assert done.returncode == 0, done.stderr
    assert "BetaWarning: Parameter `backfill_policy`" in done.stderr
    assert "allow_nonexistent_upstream_partitions" not in done.stderr
    assert done.stdout.splitlines()[0] == "backfill user0 (running): key:rolling 2024-01-01..2024-01-02"


def test_blocks_of_two_threads_take_turns_and_leave_the_warning_filters_as_they_were():
    """The order that would leave an "ignore" installed were the blocks to overlap: the
    first block to start exits while the second runs."""
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()

    def first() -> None:
        with quiet_dagster_betas():
            first_in.set()
            second_in.wait(timeout=0.5)  # it does not come in: blocks take turns
        first_out.set()

    def second() -> None:
        first_in.wait()
        with quiet_dagster_betas():
            second_in.set()
            first_out.wait(timeout=5)

    with warnings.catch_warnings(record=True) as caught:
        warnings.resetwarnings()  # without this suite's own "ignore" of beta warnings
        warnings.simplefilter("always")
        before = list(warnings.filters)
        threads = [threading.Thread(target=first), threading.Thread(target=second)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert warnings.filters == before
        dg.AssetSelection.from_string("group:orders")
    assert any(issubclass(w.category, dg.BetaWarning) and "include_sources" in str(w.message) for w in caught)
