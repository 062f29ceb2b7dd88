"""The wall-clock lint through the real CLI (`partition-assets lint`): each finding printed,
exit codes 1 and 2, the example clean (the library itself: partition_assets_tests/unit/test_lint.py)."""

import dagster as dg

from partition_assets.lint import FIX
from partition_assets_tests.support.cli_runs import run_cli
from partition_assets_tests.unit.test_lint import EXPECTED, FIXTURE


def test_the_cli_prints_each_finding_and_exits_1():
    for target in (["-f", FIXTURE], ["-m", "partition_assets_tests.support.locations.wall_clock_assets"]):
        done = run_cli("lint", *target)

        assert done.returncode == 1, done.stderr
        lines = done.stdout.splitlines()
        assert len(lines) == len(EXPECTED)
        for line, (number, call, asset, _) in zip(lines, EXPECTED):
            assert line.startswith(f"{FIXTURE}:{number}: {call} in "), line
            assert f"asset {asset}" in line and line.endswith(FIX), line


def test_the_example_code_location_is_clean():
    from partition_assets.example import assets, defs

    in_location, in_file = asset_count(defs.assets), asset_count(dg.load_assets_from_modules([assets]))
    for target, count in (
        (["-m", "partition_assets.example"], in_location),
        ([], in_location),  # [tool.dagster] module_name
        (["-f", "partition_assets/example/assets.py"], in_file),
    ):
        done = run_cli("lint", *target)

        assert done.returncode == 0, done.stdout + done.stderr
        assert done.stdout.strip().endswith(f"no wall clock in the logic of {count} assets"), done.stdout


def test_bad_targets_exit_2_with_one_line(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("def asset(:\n")
    for target, names in [
        (["-f", str(tmp_path / "missing.py")], "missing.py: no such file"),
        (["-f", str(broken)], "is not valid Python (line 1"),
        (["-m", "no_such_module_anywhere"], "no module 'no_such_module_anywhere'"),
        (["-f", "partition_assets/errors.py"], "defines no assets"),
    ]:
        done = run_cli("lint", *target)

        assert done.returncode == 2, done.stdout + done.stderr
        assert done.stdout == ""
        assert done.stderr.splitlines() == [done.stderr.strip()] and names in done.stderr, done.stderr
        assert done.stderr.startswith("partition-assets lint: ")


def asset_count(assets):
    return len({key for item in assets if isinstance(item, dg.AssetsDefinition) for key in item.keys})
