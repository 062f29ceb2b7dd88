"""`partition-assets vacuum` of a folder that holds no table: refused before anything is read
(what a killed write leaves is vacuumed in partition_assets_tests/integration/test_delta_write.py);
a failpoint set to raise an unexpected error."""

import pytest

from partition_assets.cli import main as cli
from partition_assets.storage.failpoints import ENV, InjectedFailure, failpoint


@pytest.mark.parametrize(("folder", "expected"), [("missing", "does not exist"), ("plain", "is not a table")])
def test_vacuum_of_a_folder_holding_no_table_names_it_and_exits_2(tmp_path, capsys, folder, expected):
    (tmp_path / "plain").mkdir()
    path = tmp_path / folder
    assert cli(["vacuum", str(path)]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"partition-assets vacuum: {path}") and expected in error
    assert "pass the folder of a table" in error


def test_a_failpoint_set_to_raise_raises_an_unexpected_error_there_and_nowhere_else(monkeypatch):
    monkeypatch.setenv(ENV, "gating:raise")
    failpoint("between_table_commits")  # another point: nothing
    with pytest.raises(InjectedFailure, match="failpoint gating"):
        failpoint("gating")
