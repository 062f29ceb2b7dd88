"""docs/guide/your-project.md, followed word for word (issue 52): its marked blocks, extracted
from the page, run in order in an empty folder with a fresh DAGSTER_HOME, and what each run
block printed holds the lines the page shows after it, so that the page cannot drift from
the product. The page's last section states the marks; in short: `run` blocks run in bash (in
the folder and with the variables the previous ones left), `file PATH` blocks are written,
`output` blocks are checked, the `install` block runs with `pip` being uv's (from its cache),
`run spark` blocks run once no Spark server was started by the blocks before them.

The guide's first block builds partition_assets from a copy of this checkout and installs it
with create-dagster and the scaffolded project into a venv of the test's folder; every command
after it is that venv's (no PYTHONPATH, no test venv on PATH)."""

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from partition_assets_tests.support import REPO
from partition_assets_tests.support.checkout import UV, source_copy
from partition_assets_tests.support.webserver import free_port

GUIDE = REPO / "docs" / "guide" / "your-project.md"
# A mark, then the fenced block right after it.
MARKED_BLOCK = re.compile(r"^<!-- guide: (\w+)(?: (\S+))? -->\n```\w*\n(.*?)^```$", re.MULTILINE | re.DOTALL)
BACKFILL_ID = re.compile(r"\bbackfill ([0-9a-f]{12})\b")
# The install block's `pip`: uv's, from its cache when it holds every release, linking files.
UV_PIP = (
    'pip() { "$GUIDE_UV" pip "$@" --link-mode symlink --offline -q 2>/dev/null '
    '|| "$GUIDE_UV" pip "$@" --link-mode symlink -q; }\n'
)

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Block:
    kind: str  # install, run, file, output
    argument: str | None  # a file's path; `spark` for a run block of the Spark test
    text: str


def guide_blocks() -> list[Block]:
    return [Block(kind, argument or None, text) for kind, argument, text in MARKED_BLOCK.findall(GUIDE.read_text())]


def printed_line_pattern(line: str) -> re.Pattern:
    """A line of an output block as a pattern: `<id>` a backfill id, `...` any text."""
    pattern = re.escape(line).replace(re.escape("<id>"), "[0-9a-f]{12}").replace(re.escape("..."), ".*")
    return re.compile(pattern)


class GuideShell:
    """Runs bash blocks one after the other in `folder`, each starting where the previous one
    ended (its working directory and exported variables)."""

    def __init__(self, folder: Path, env: dict[str, str]) -> None:
        self.env = env
        self.state = folder / ".guide_state"
        self.state.mkdir()
        (self.state / "cwd").write_text(str(folder))
        (self.state / "env").write_text("".join(f"export {name}={_quoted(value)}\n" for name, value in env.items()))

    def run(self, text: str, prelude: str = "") -> subprocess.CompletedProcess:
        script = (
            f'. {self.state}/env && cd "$(cat {self.state}/cwd)" && set -e\n{prelude}{text}\n'
            f"pwd > {self.state}/cwd && export -p > {self.state}/env\n"
        )
        return subprocess.run(["bash", "-c", script], env={}, capture_output=True, text=True, timeout=300)

    @property
    def cwd(self) -> Path:
        return Path((self.state / "cwd").read_text().strip())


def installed_off_pins(shell: GuideShell) -> dict[str, tuple[str, str]]:
    """The packages of constraints.txt that the guide's venv holds in another release than
    the pinned one: {name: (installed, pinned)}."""
    pins = dict(line.split("==") for line in (REPO / "constraints.txt").read_text().splitlines() if "==" in line)
    listed = shell.run("python -m pip freeze --disable-pip-version-check")
    installed = dict(line.lower().split("==") for line in listed.stdout.splitlines() if "==" in line)
    assert {"dagster", "pyspark", "create-dagster"} <= installed.keys(), listed.stdout
    return {
        name: (installed[name], pinned)
        for name, pinned in pins.items()
        if name in installed and installed[name] != pinned
    }


def _quoted(value: str) -> str:
    return "'" + value.replace("'", "'\\''") + "'"


def follow_the_guide(root: Path, spark: bool) -> list[str]:
    """Runs the page's blocks under `root` (run spark blocks only when `spark`); the output of
    each run block."""
    folder = root / "empty_folder"
    folder.mkdir()
    # A user's shell: none of this test run's Python paths or instance, the clone of this
    # repository in PARTITION_ASSETS; Spark's files in a folder of its own, on a port of its own.
    venv_bin = str(Path(UV).parent)
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE", "VIRTUAL_ENV", "DAGSTER_HOME", "PARTITION_ASSETS_LAKE")
        and not name.startswith("PYTEST")
    }
    env["PATH"] = os.pathsep.join(entry for entry in env["PATH"].split(os.pathsep) if entry != venv_bin)
    env["PARTITION_ASSETS"] = str(source_copy(root / "partition_assets_clone"))
    env["GUIDE_UV"] = UV
    env["PARTITION_ASSETS_STATE_DIR"] = str(root / "spark_state")
    env["PARTITION_ASSETS_SPARK_CONNECT_PORT"] = str(free_port())
    shell = GuideShell(folder, env)
    printed: list[str] = []
    try:
        _run_blocks(shell, spark, printed)
    finally:  # the Spark server the guide's commands started, if any
        shell.run("partition-assets spark stop")
    return printed


def _run_blocks(shell: GuideShell, spark: bool, printed: list[str]) -> None:
    last: subprocess.CompletedProcess | None = None
    for block in guide_blocks():
        if block.kind == "file":
            path = shell.cwd / (block.argument or "")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(block.text)
        elif block.kind in ("install", "run"):
            if block.argument == "spark" and not spark:
                last = None
                continue
            if block.argument == "spark":  # the steps before it asked for no Spark: none started
                assert not list(Path(shell.env["PARTITION_ASSETS_STATE_DIR"]).glob("spark-connect-*.pid"))
            ids = BACKFILL_ID.findall("".join(printed))
            text = block.text.replace("<id>", ids[-1]) if ids else block.text
            last = shell.run(text, prelude=UV_PIP if block.kind == "install" else "")
            assert last.returncode == 0, f"{block.text}\n{last.stdout}\n{last.stderr}"
            printed.append(last.stdout)
            if block.kind == "install":
                assert installed_off_pins(shell) == {}
        elif block.kind == "output" and last is not None:
            lines = last.stdout.splitlines()
            for line in block.text.splitlines():
                assert any(printed_line_pattern(line).fullmatch(got) for got in lines), (line, last.stdout)
        elif block.kind not in ("output",):
            raise AssertionError(f"unknown mark {block.kind!r} in {GUIDE}")


def test_the_page_marks_each_kind_of_block_it_says_it_does():
    kinds = {(block.kind, block.argument) for block in guide_blocks()}
    assert {("install", None), ("run", None), ("run", "spark"), ("output", None)} <= kinds
    assert {path for kind, path in kinds if kind == "file"} >= {
        ".dagster_home/dagster.yaml",
        "src/my_project/visits.py",
        "src/my_project/definitions.py",
        "src/my_project/orders.py",
        "src/my_project/lake.py",
        "backfill_visits.py",
    }


def test_the_guide_runs_word_for_word_from_an_empty_folder_spark_only_where_it_says(tmp_path):
    printed = follow_the_guide(tmp_path, spark=True)
    assert any("published: orders v0, daily_revenue v0" in output for output in printed)  # the Spark section ran
    assert any("ran: backfill" in output for output in printed)  # and the script's
