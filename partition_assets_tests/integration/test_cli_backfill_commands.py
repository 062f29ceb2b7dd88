"""`partition-assets backfill` on a real instance (cli/backfill.py `run_backfill_command`, with
arguments as its parser reads them): a command on a recorded backfill prints what its command
returns and exits 0; `status` prints the heatmap, then its notes (a paused backfill's), and
writes the heatmap as HTML where asked, refusing a folder that does not exist before writing
anything; `list` prints a line per backfill, nothing when
none; a malformed id is refused before the instance is opened. No node runs: the records a
test sets up (support/records.py SPEC) are only read or have their status changed.
(Its logic without an instance: partition_assets_tests/unit/test_cli_backfill.py.)
"""

import dagster as dg
import pytest

from partition_assets.backfill.commands import backfill_status
from partition_assets.backfill.model import BackfillStatus
from partition_assets.cli.backfill import run_backfill_command
from partition_assets.cli.heatmap import Heatmap
from partition_assets.cli.main import build_parser
from partition_assets.errors import BackfillIdError, BackfillPlanError
from partition_assets_tests.support.records import SPEC, backfill_store, record_at


def backfill(*argv: str) -> int:
    """`partition-assets backfill ARGV` as its parser reads it, in this process."""
    line = ["backfill", *argv]
    return run_backfill_command(build_parser().parse_args(line), line)


def test_a_command_on_a_recorded_backfill_prints_what_it_returns_and_changes_its_status(home, capsys):
    with backfill_store(home) as store:
        record_at(store, "bf", BackfillStatus.RUNNING, SPEC)
    assert backfill("pause", "bf") == 0
    assert capsys.readouterr().out == "backfill bf paused: it launches nothing new, its runs in flight finish\n"
    assert backfill("unpause", "bf") == 0
    assert capsys.readouterr().out == "backfill bf unpaused: it launches its nodes again\n"
    assert backfill("cancel", "bf") == 0
    assert capsys.readouterr().out == "backfill bf canceled; 0 runs in flight canceled\n"
    with backfill_store(home) as store:
        assert store.status("bf") == BackfillStatus.CANCELED


def test_status_prints_the_heatmap_then_its_notes_and_writes_the_heatmap_as_html(home, capsys, tmp_path):
    with backfill_store(home) as store:
        record_at(store, "bf", BackfillStatus.PAUSED, SPEC)
    with dg.DagsterInstance.get() as instance:
        report = backfill_status(instance, "bf")
    heatmap = Heatmap(report.graph, report.node_states, report.title)
    page = tmp_path / "bf.html"
    assert backfill("status", "bf", "--html", str(page)) == 0
    assert capsys.readouterr().out == f"{heatmap.text()}\n{report.launch}\n"
    assert report.launch == "paused: launches nothing until `partition-assets backfill unpause bf`"
    assert page.read_text() == heatmap.html()


def test_status_refuses_a_heatmap_file_in_a_missing_folder_before_writing_anything(home, capsys, tmp_path):
    with backfill_store(home) as store:
        record_at(store, "bf", BackfillStatus.RUNNING, SPEC)
    missing = tmp_path / "missing" / "bf.png"
    with pytest.raises(BackfillPlanError, match=f"cannot write {missing}: its folder does not exist"):
        backfill("status", "bf", "--png", str(missing))
    assert capsys.readouterr().out == ""
    assert not missing.parent.exists()


def test_list_prints_a_line_per_backfill_and_nothing_when_there_is_none(home, capsys):
    assert backfill("list") == 0
    assert capsys.readouterr().out == ""
    with backfill_store(home) as store:
        record_at(store, "first", BackfillStatus.RUNNING, SPEC)
        record_at(store, "second", BackfillStatus.PUBLISHED, SPEC)
    assert backfill("list") == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines if line.split()[0] in ("first", "second")] == ["first", "second"]


def test_a_malformed_id_is_refused_before_the_instance_is_opened(monkeypatch, tmp_path):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "no_such_home"))  # opening it would fail otherwise
    with pytest.raises(BackfillIdError, match="the backfill id argument"):
        backfill("status", "../x")
