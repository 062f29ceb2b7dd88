"""This checkout as a user's clone of it, for the tests that install it into a fresh venv
(e2e/test_installed_wheel.py, e2e/test_guide_your_project.py): a copy of what a wheel is built
from, and uv run from its cache alone when that holds every release, else from the index (as
`make install` does)."""

import shutil
import subprocess
import sys
from pathlib import Path

from partition_assets_tests.support import REPO

UV = str(Path(sys.executable).parent / "uv")


def uv(*args: str) -> None:
    """`uv args` from uv's cache alone, else from the index."""
    if subprocess.run([UV, *args, "--offline"], capture_output=True).returncode != 0:
        subprocess.run([UV, *args], check=True, capture_output=True)


def source_copy(dest: Path) -> Path:
    """`dest`, holding what the package is built from (its sources, pyproject.toml, README.md)
    and constraints.txt, without bytecode: building there writes nothing into this checkout."""
    shutil.copytree(REPO / "partition_assets", dest / "partition_assets", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md", "constraints.txt"):
        shutil.copy(REPO / name, dest)
    return dest
