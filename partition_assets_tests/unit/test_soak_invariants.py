"""The soak's `faults_named` invariant (bench/soak/invariants.py) across the upgrade step: a
fault that hit the previous release is recovered by that release's commands, whose log lines
predate the ones this release writes; only faults this release recovered must be named."""

from pathlib import Path

from bench.soak.invariants import Evidence, faults_named
from bench.soak.soak import Injected


def evidence(root: Path, injected: list[Injected]) -> Evidence:
    (root / "home").mkdir()
    (root / "backfill.log").write_text("backfill b1: 13 nodes\n")  # no line naming a lost coordinator
    return Evidence(root, root / "home", root / "lake", "b1", 4, "2024-01-01", "2024-01-04", injected)


def test_a_fault_the_previous_release_recovered_need_not_be_named_in_this_releases_words(tmp_path):
    killed = Injected("coordinator", 12.0, "coordinator 7 killed (SIGKILL)", ["`backfill resume`"], "c552270")
    held, detail = faults_named(evidence(tmp_path, [killed]))
    assert held, detail
    assert "1 hit the previous release" in detail


def test_a_fault_this_release_recovered_must_be_named(tmp_path):
    killed = Injected("coordinator", 12.0, "coordinator 7 killed (SIGKILL)", ["`backfill resume`"])
    held, detail = faults_named(evidence(tmp_path, [killed]))
    assert not held
    assert "coordinator/process_group: 1 faults, 0 lines matching" in detail
