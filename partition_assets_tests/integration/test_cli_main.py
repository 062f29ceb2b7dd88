"""Every `partition-assets` subcommand refuses a bad input the same way: exit code 2, one
or two lines naming the problem and the fix, no traceback, and nothing recorded or written;
through `main()` in this process (`backfill run` starts its workers' fork server first; the
installed command: partition_assets_tests/e2e/test_cli_main_installed.py)."""

import socket
from pathlib import Path

import dagster as dg
import pytest
import yaml

from partition_assets.automation import backfill_run_config
from partition_assets.backfill.planning.spec import BackfillSpec
from partition_assets.backfill.state.record import BackfillRecord
from partition_assets.backfill.state.store import BackfillStore
from partition_assets.cli.main import main
from partition_assets.run_tags import BACKFILL_ID_TAG
from partition_assets_tests.support import REPO
from partition_assets_tests.support.locations import automation_defs
from partition_assets_tests.support.records import recorded_ids

ENGINE = ["-m", "partition_assets_tests.support.locations.engine_defs"]
EXAMPLE = ["-m", "partition_assets.example"]
JANUARY = ["--start", "2024-01-01", "--end", "2024-01-08"]
KNOWN_ID = "known0backfill"

# (argv, a fragment of the one-line message that names the problem or the fix)
BAD_INPUTS = [
    # backfill plan | run: the spec
    (["backfill", "plan", *ENGINE, "--select", "", *JANUARY], "the selection is empty"),
    (["backfill", "plan", *ENGINE, "--select", "key:raw and", *JANUARY], "is not valid"),
    (["backfill", "plan", *ENGINE, "--select", "key:no_such_asset", *JANUARY], "matches no asset"),
    (["backfill", "run", *ENGINE, "--select", "key:rwa", *JANUARY], "close names: ['raw']; nothing was written"),
    # a key without key:
    (["backfill", "run", *ENGINE, "--select", "rwa", *JANUARY], "close names: ['raw']; nothing was written"),
    (["backfill", "run", *ENGINE, "--select", "key:raw", *JANUARY, "--max-parallel", "0"], "--max-parallel"),
    (["backfill", "plan", *ENGINE, "--select", "key:raw", *JANUARY, "--max-parallel", "many"], "invalid int"),
    (
        ["backfill", "plan", *ENGINE, "--select", "key:raw", "--start", "2024-01-09", "--end", "2024-01-02"],
        "after --end",
    ),
    (
        ["backfill", "plan", *ENGINE, "--select", "key:raw", "--start", "2024-13-01", "--end", "2024-12-31"],
        "not an ISO date",
    ),
    (["backfill", "plan", *ENGINE, "--select", "key:raw", "--start", "2024-01-01"], "give both --start and --end"),
    (["backfill", "plan", *ENGINE, "--select", "key:raw", "--produced-by", "0badc0de"], "'0badc0de' is no commit"),
    (["backfill", "plan", *ENGINE, "--select", "key:raw", "--produced-by", "HEAD.."], "neither a commit nor a range"),
    (["backfill", "plan", *ENGINE, "--select", "key:raw", "--stale"], "selects assets without a code version"),
    (["backfill", "plan", *ENGINE, "--select", "key:raw"], "give a start and an end"),
    (["backfill", "run", *ENGINE, "--select", "key:raw", *JANUARY, "--lookback", "-1"], "--lookback"),
    (["backfill", "plan", *ENGINE, "--select", "key:raw", *JANUARY, "--exact", "--lookback", "2"], "contradict"),
    (["backfill", "run", *ENGINE, "--select", "key:raw", *JANUARY, "--keys", "2024-01-03"], "--keys and --start"),
    (["backfill", "plan", *ENGINE, "--select", "key:raw", "--keys", "2024-01-03,,2024-01-04"], "an empty key"),
    (["backfill", "run", *ENGINE, "--select", "key:raw", "--keys", "2024-01-03,2024-02-30"], "no partition of any"),
    (["backfill", "run", *ENGINE, "--select", "key:raw", *JANUARY, "--inputs-as-of", "yesterday"], "nor an ISO time"),
    (["backfill", "run", *ENGINE, "--select", "key:raw", *JANUARY, "--asset-limit", "raw=0"], "N >= 1"),
    (["backfill", "plan", *ENGINE, "--select", "key:raw", *JANUARY, "--asset-limit", "raw"], "ASSET=N"),
    (["backfill", "run", *ENGINE, "--select", "key:raw", *JANUARY, "--asset-limit", "clean=1"], "outside the backfill"),
    (["backfill", "plan", *ENGINE, "--select", "key:raw", *JANUARY, "--static", "region"], "DIMENSION=key1,key2"),
    (["backfill", "run", *ENGINE, "--select", "key:raw", *JANUARY, "--tag", "dagster/partition=x"], "reserved prefix"),
    (["backfill", "run", *ENGINE, "--select", "key:raw", *JANUARY, "--runs-via", "docker"], "is not a way to run"),
    (["backfill", "run", *ENGINE, "--select", "key:raw", *JANUARY, "--detach"], "defines no job 'sparse_backfill'"),
    # backfill plan | run: what the spec plans against the code location
    (
        ["backfill", "run", *ENGINE, "--select", "key:raw", "--start", "1990-01-01", "--end", "1990-01-02"],
        "its partitions run from 2024-01-01 to",
    ),
    (
        [
            "backfill",
            "plan",
            *ENGINE,
            "--select",
            "key:month",
            "--start",
            "2024-01-01",
            "--end",
            "2024-01-03",
            "--exact",
        ],
        "wholly inside",
    ),
    (["backfill", "run", *ENGINE, "--select", "key:raw", *JANUARY, "--static", "planet=mars"], "no static dimension"),
    (["backfill", "run", *EXAMPLE, "--select", "key:regions", "--static", "regions=mars"], "choose among"),
    (
        ["backfill", "plan", *EXAMPLE, "--select", "key:daily_region_revenue", *JANUARY, "--static", "planet=mars"],
        "its static dimensions: ['region']",
    ),
    (["backfill", "run", *EXAMPLE, "--select", "key:campaign_report"], "add_dynamic_partitions('campaigns'"),
    (["backfill", "plan", "-m", "no_such_module", "--select", "key:raw", *JANUARY], "no module 'no_such_module'"),
    (["backfill", "run", "-f", "/no/such/defs.py", "--select", "key:raw", *JANUARY], "does not exist"),
    (["backfill", "resume", "--code-root", "/no/such/root", KNOWN_ID], "no such folder"),
    (["backfill", "run", "--location", "example@000000000000", "--select", "key:raw", *JANUARY], "0 deploys match"),
    # backfill status | resume | retry | cancel: unknown ids list the known ones
    (["backfill", "status", "no_such_id"], f"known: {KNOWN_ID}"),
    (["backfill", "resume", "no_such_id"], f"known: {KNOWN_ID}"),
    (["backfill", "retry", "no_such_id"], f"known: {KNOWN_ID}"),
    (["backfill", "cancel", "no_such_id"], f"known: {KNOWN_ID}"),
    (["backfill", "status", KNOWN_ID, "--png", "/no/such/folder/heatmap.png"], "folder does not exist"),
    # safe backfills: modes, gate overrides, and actions the backfill's state does not allow
    (["backfill", "run", *ENGINE, "--select", "key:raw", *JANUARY, "--publish", "eventually"], "is not a mode"),
    (["backfill", "plan", *ENGINE, "--select", "key:raw", *JANUARY, "--gate", "raw:rows=lots"], "rows=<fraction>"),
    (["backfill", "publish", KNOWN_ID], f"backfill {KNOWN_ID} is running"),
    (["backfill", "rollback", KNOWN_ID], "nothing to roll back"),
    (["backfill", "diff", "no_such_id"], f"known: {KNOWN_ID}"),
    (["backfill", "discard", "no_such_id"], f"known: {KNOWN_ID}"),
    (["backfill", "ledger", "no_such_id"], f"known: {KNOWN_ID}"),
    (["backfill"], "required"),
    # isolation: launch windows, waiting for leases, pause and unpause
    (["backfill", "run", *ENGINE, "--select", "key:raw", *JANUARY, "--window", "25:00-06:00"], "no time of day"),
    (["backfill", "plan", *ENGINE, "--select", "key:raw", *JANUARY, "--window", "20:00-06:00 Mars/Olympus"], "unknown"),
    (["backfill", "run", *ENGINE, "--select", "key:raw", *JANUARY, "--on-lease", "later"], "is not a choice"),
    (["backfill", "unpause", KNOWN_ID], "it is not paused"),
    (["backfill", "pause", "no_such_id"], f"known: {KNOWN_ID}"),
    # extend: only a backfill stopped short of publishing, and an id that is recorded
    (["backfill", "extend", KNOWN_ID, "--end", "2024-02-01"], "cannot extend it"),
    (["backfill", "extend", "no_such_id", "--end", "2024-02-01"], f"known: {KNOWN_ID}"),
    # backfill ids become file names: no '/', no '..', never absolute (audit hole 4)
    (["backfill", "status", "../../escaped/dir/pwn"], "cannot name a backfill"),
    (["backfill", "resume", "/tmp/escaped"], "cannot name a backfill"),
    (["backfill", "discard", "a/b"], "cannot name a backfill"),
    (["backfill", "cancel", ".."], "cannot name a backfill"),
    (["backfill", "publish", "known..escaped"], "cannot name a backfill"),
    (["backfill", "adopt", "../../escaped"], "cannot name a backfill"),
    # vacuum, deploy, undeploy, spark
    (["vacuum", "/no/such/table"], "/no/such/table"),
    (["vacuum", "{not_a_table}"], "{not_a_table}"),
    (["vacuum", "{not_a_table}", "--retention-hours", "-1"], "retention -1.0 hours is refused"),
    (["vacuum", "{not_a_table}", "--retention-hours", "0.5"], "retention 0.5 hours is refused"),
    (["deploy", "no_such_commit_0123"], "is not a commit"),
    (["deploy", "HEAD", "--port", "99999"], "not a TCP port"),
    (["deploy", "HEAD", "--port", "{busy_port}"], "is in use"),
    (["undeploy", "no_such_deploy"], "0 deploys match"),
    (["spark", "restart"], "invalid choice"),
    # an abbreviated long option is refused (argparse would read it as the option it begins)
    (["backfill", "run", *ENGINE, "--select", "key:raw", *JANUARY, "--max-par", "2"], "unrecognized arguments: --max"),
    (["backfill", "ledger", KNOWN_ID, "--js"], "unrecognized arguments: --js"),
    (
        [
            "backfill",
            "plan",
            "--module",
            "partition_assets_tests.support.locations.engine_defs",
            "--select",
            "key:raw",
            *JANUARY,
        ],
        "unrecognized arguments: --module",
    ),
    (["vacuum", "{not_a_table}", "--retention", "200"], "unrecognized arguments: --retention 200"),
]


def with_a_recorded_backfill(home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`home` with its instance created and one recorded backfill, as a user's would be; the
    repository the working directory."""
    monkeypatch.chdir(REPO)
    with dg.DagsterInstance.get() as instance:
        BackfillRecord(
            BackfillSpec(
                module="partition_assets_tests.support.locations.engine_defs",
                selection="key:raw",
                start="2024-01-01",
                end="2024-01-02",
            ),
            id=KNOWN_ID,
            store=BackfillStore(instance),
        ).save()
    return home


@pytest.fixture
def home(home, monkeypatch):
    return with_a_recorded_backfill(home, monkeypatch)


def files_under(*folders: Path) -> set[str]:
    return {str(path) for folder in folders for path in folder.rglob("*")}


def run_in_process(argv: list[str], capsys) -> tuple[int, str]:
    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse refuses malformed flags itself
        code = exit_.code
    return code, capsys.readouterr().err


def test_there_are_at_least_25_bad_inputs_across_every_subcommand():
    assert len(BAD_INPUTS) >= 25
    commands = {" ".join(argv[:2]) if argv[0] == "backfill" and len(argv) > 1 else argv[0] for argv, _ in BAD_INPUTS}
    assert commands >= {
        "backfill plan",
        "backfill run",
        "backfill status",
        "backfill resume",
        "backfill retry",
        "backfill cancel",
        "vacuum",
        "deploy",
        "undeploy",
        "spark",
    }


@pytest.mark.parametrize(("argv", "names"), BAD_INPUTS, ids=[" ".join(a)[:70] for a, _ in BAD_INPUTS])
def test_a_bad_input_exits_2_with_a_short_message_and_writes_nothing(argv, names, home, tmp_path, capsys):
    not_a_table = tmp_path / "not_a_table"
    not_a_table.mkdir()
    (not_a_table / "notes.txt").write_text("not a table")
    with socket.socket() as listener:  # a port some other server holds
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        given = {"not_a_table": not_a_table, "busy_port": listener.getsockname()[1]}
        argv = [a.format(**given) for a in argv]
        names = names.format(**given)
        before = files_under(home, not_a_table, REPO / ".deploys")

        code, stderr = run_in_process(argv, capsys)

    # argparse's own refusals print the command's usage first (indented when it wraps).
    message = [line for line in stderr.splitlines() if line.strip() and not line.startswith(("usage:", " "))]
    assert code == 2, stderr
    assert "Traceback" not in stderr
    assert 1 <= len(message) <= 2, stderr
    assert names in stderr, stderr
    assert files_under(home, not_a_table, REPO / ".deploys") == before, "a refused command must write nothing"
    with dg.DagsterInstance.get() as instance:
        assert instance.get_runs() == []


@pytest.mark.parametrize(
    ("capacity", "names"),
    [({"share_of_pools": 1.5}, "share_of_pools is 1.5"), ({"pools": {"nosuch": 1}}, "names ['nosuch']")],
)
def test_a_bad_backfill_capacity_in_dagster_yaml_refuses_the_backfill_and_records_nothing(
    capacity, names, home, capsys
):
    config = yaml.safe_load((home / "dagster.yaml").read_text())
    config["partition_assets"]["backfills"] = capacity
    (home / "dagster.yaml").write_text(yaml.safe_dump(config))
    argv = [
        "backfill",
        "run",
        "-m",
        "partition_assets_tests.support.locations.isolation_defs",
        "--select",
        "key:free",
        *JANUARY,
    ]
    code, stderr = run_in_process(argv, capsys)
    assert code == 2 and names in stderr and "Nothing was launched" in stderr and "Traceback" not in stderr, stderr
    assert recorded_ids(home) == [KNOWN_ID]
    with dg.DagsterInstance.get() as instance:
        assert instance.get_runs() == []


def test_without_dagster_home_a_backfill_command_says_how_to_set_it(monkeypatch, capsys):
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    code, stderr = run_in_process(["backfill", "status", KNOWN_ID], capsys)
    assert code == 2 and "export DAGSTER_HOME" in stderr and "Traceback" not in stderr


def test_without_dagster_home_the_hint_says_how_to_set_it_in_any_project(monkeypatch, capsys):
    """Not `make dev uses .dagster_home`, which means nothing outside this repository."""
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    code, stderr = run_in_process(["backfill", "plan", *ENGINE, "--select", "key:raw", *JANUARY], capsys)
    assert code == 2 and len(stderr.splitlines()) == 1, stderr
    assert "make dev" not in stderr and "mkdir -p .dagster_home && export DAGSTER_HOME=" in stderr, stderr


def test_a_dagster_home_that_is_no_folder_is_named_with_how_to_create_it(tmp_path, monkeypatch, capsys):
    """Dagster's own refusal was a 25-line DagsterInvariantViolationError traceback, exit 1."""
    missing = tmp_path / "no_such_home"
    monkeypatch.setenv("DAGSTER_HOME", str(missing))
    for argv in (["backfill", "plan", *ENGINE, "--select", "key:raw", *JANUARY], ["backfill", "list"]):
        code, stderr = run_in_process(argv, capsys)
        assert code == 2 and "Traceback" not in stderr and len(stderr.splitlines()) == 1, stderr
        assert f"DAGSTER_HOME {missing} is not a folder: create it (`mkdir -p {missing}`)" in stderr, stderr
    assert not missing.exists() and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("bad_id", ["../../../../escaped/dir/pwn", "{tmp_path}/pwn-absolute", "a/pwn"])
def test_a_coordinator_run_tagged_with_a_path_for_an_id_fails_and_writes_nothing(bad_id, home, tmp_path):
    """Audit hole 4: the Launchpad job took its backfill id from the run tag unchecked, and a tag
    of ../../../escaped/dir/pwn wrote a record outside DAGSTER_HOME while the job succeeded."""
    bad_id = bad_id.format(tmp_path=tmp_path)
    with dg.DagsterInstance.get() as instance:
        result = automation_defs.engine.execute_in_process(
            run_config=backfill_run_config(selection="group:jobs", start="2024-01-05", end="2024-01-06"),
            tags={BACKFILL_ID_TAG: bad_id},
            instance=instance,
            raise_on_error=False,
        )
        assert not result.success
        failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
        message = failure.event_specific_data.error.message
        assert "cannot name a backfill" in message and BACKFILL_ID_TAG in message, message
        assert [run.run_id for run in instance.get_runs()] == [result.run_id]  # no node run
    assert not list(tmp_path.rglob("pwn*"))
    assert recorded_ids(home) == [KNOWN_ID]
