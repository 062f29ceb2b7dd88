"""An earlier release of partition_assets, for the upgrade step of the soak (issue 55 part 3)
and its test in `make test` (partition_assets_tests/e2e/test_upgrade_mid_backfill.py): the
package built from a commit of this repository, installed in a venv of its own, and its
`partition-assets` run as a user's host still on that release runs it.

Usage: python bench/soak/upgrade.py [COMMIT]   (prints the release's venv; builds it if needed)

A release is built once per commit sha, under $PARTITION_ASSETS_RELEASES_CACHE
(~/.cache/partition_assets_releases unless set), `<sha>+postgres/`: `source/` (`git archive` of the
commit) and `venv/` (`uv venv`, then `uv pip install -c constraints.txt source/[postgres]`:
the package as a deployment on Postgres installs it, `dagster-postgres` included; from uv's
cache alone when that holds every release, else from the index, as `make install` does). A
second call costs a look at a file. Builders of the same sha (two test workers) take turns.

Its processes run with no PYTHONPATH, from a folder that holds no other partition_assets (the
user's project folder): Dagster puts a code location's working directory first on the import
path of every node run, so a run from this checkout would import this checkout's package.

Not guaranteed: a commit whose package does not build or install (its constraints gone from
the index) fails here, naming the command; a cache removed by hand under a running release.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script
    sys.path.insert(0, str(REPO))

from partition_assets_tests.support.checkout import UV, uv

# The landing before every kind of state was versioned: it versions backfill records and
# coordinator presence, not leases, the ledger or the release log (docs/guide/upgrading.md).
DEFAULT_COMMIT = "c552270"
CACHE_ENV = "PARTITION_ASSETS_RELEASES_CACHE"
READY = "ready"  # written last: a folder without it is a build cut short, built again
# What a deployment installs beside the package: the instance on Postgres (the soak's) needs it.
EXTRAS = "postgres"


@dataclass(frozen=True)
class Release:
    """An installed release of partition_assets: the commit it was built from and its venv."""

    sha: str
    root: Path

    @property
    def bin(self) -> Path:
        """The venv's bin folder (its python, its `partition-assets` console script)."""
        return self.root / "venv" / "bin"

    @property
    def python(self) -> Path:
        return self.bin / "python"

    @property
    def source(self) -> Path:
        """The commit's tree, as the package was built from it (its tests' code locations too)."""
        return self.root / "source"

    def command(self, *args: str) -> list[str]:
        """`partition-assets <args>` of this release, as its console script."""
        return [str(self.bin / "partition-assets"), *args]

    def env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """`base` (this process's environment when None) for this release's processes: no
        PYTHONPATH (it would put another package first), bytecode written (each node run
        would compile Dagster again)."""
        drop = ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE", "VIRTUAL_ENV")
        env = {key: value for key, value in (os.environ if base is None else base).items() if key not in drop}
        return {**env, "PATH": os.pathsep.join([str(self.bin), env.get("PATH", "")])}

    def run(
        self, *args: str, cwd: Path, env: Mapping[str, str] | None = None, timeout: float = 600
    ) -> subprocess.CompletedProcess:
        """`partition-assets <args>` of this release run to its end from `cwd`, its output as text."""
        return subprocess.run(
            self.command(*args), cwd=cwd, env=self.env(env), capture_output=True, text=True, timeout=timeout
        )

    def start(self, *args: str, cwd: Path, env: Mapping[str, str] | None = None, log: Path) -> subprocess.Popen:
        """`partition-assets <args>` of this release started from `cwd` in a session of its own
        (`kill` ends it with every process it started), its output to `log`."""
        with log.open("ab") as out:
            return subprocess.Popen(
                self.command(*args),
                cwd=cwd,
                env=self.env(env),
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )


def kill(process: subprocess.Popen) -> None:
    """SIGKILL to `process`'s process group (a host lost mid-backfill), then reaps it."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "partition_assets_releases")


def previous_release(commit: str = DEFAULT_COMMIT, repo: Path = REPO) -> Release:
    """The release built from `commit` of `repo` (a sha, `HEAD~N`, a tag), built now unless
    its sha's folder is ready."""
    sha = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--verify", f"{commit}^{{commit}}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # A folder per build (a venv without EXTRAS, of an earlier harness, may be in use: left alone).
    release = Release(sha, cache_root() / f"{sha}+{EXTRAS}")
    release.root.parent.mkdir(parents=True, exist_ok=True)
    with (release.root.parent / f"{sha}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another builder of this sha finishes first
        if not (release.root / READY).exists():
            _build(release, repo)
    return release


def _build(release: Release, repo: Path) -> None:
    """The commit's tree and a venv holding its package, in place (a venv is not relocatable)."""
    shutil.rmtree(release.root, ignore_errors=True)
    release.source.mkdir(parents=True)
    archive = subprocess.Popen(["git", "-C", str(repo), "archive", release.sha], stdout=subprocess.PIPE)
    subprocess.run(["tar", "-x", "-C", str(release.source)], stdin=archive.stdout, check=True)
    if archive.wait() != 0:
        raise subprocess.CalledProcessError(archive.returncode, ["git", "archive", release.sha])
    subprocess.run([UV, "venv", "-q", "--python", sys.executable, str(release.root / "venv")], check=True)
    uv(
        "pip",
        "install",
        "-q",
        "--python",
        str(release.python),
        "-c",
        str(release.source / "constraints.txt"),
        f"{release.source}[{EXTRAS}]",
    )
    (release.root / READY).write_text(release.sha + "\n")


if __name__ == "__main__":
    built = previous_release(*sys.argv[1:2])
    print(built.root / "venv")
