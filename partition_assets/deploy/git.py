"""What git says about the code a process runs: its commit, and a version per asset."""

from __future__ import annotations

import hashlib
import inspect
import os
import subprocess
from collections.abc import Callable
from functools import cache
from pathlib import Path

GIT_SHA_ENV = "PARTITION_ASSETS_GIT_SHA"
UNKNOWN = "unknown"
DIRTY_SUFFIX = "-dirty"


def git(directory: str | Path, *args: str) -> str:
    """`git -C directory args...`'s stripped stdout; raises CalledProcessError on failure."""
    done = subprocess.run(["git", "-C", str(directory), *args], capture_output=True, text=True, check=True)
    return done.stdout.strip()


@cache
def git_sha(path: str | Path) -> str:
    """The commit checked out in the git work tree holding `path` (a file or a folder).

    `<sha>-dirty` (as `git describe --dirty`) when a tracked Python file differs from that
    commit: the running code is then not exactly the commit's. Only Python files count,
    so registering a deploy in workspace.yaml does not make a checkout dirty. Outside a
    git work tree (an image built without .git): `$PARTITION_ASSETS_GIT_SHA`, set by the
    deploy, else "unknown". Cached: read once per process, when the code location loads.
    """
    directory = Path(path).resolve()
    if not directory.is_dir():
        directory = directory.parent
    try:
        sha = git(directory, "rev-parse", "--verify", "HEAD")
        # :(top): every Python file of the work tree, not only those below `directory`.
        changed = git(directory, "status", "--porcelain", "--untracked-files=no", "--", ":(top)*.py")
    except (subprocess.CalledProcessError, FileNotFoundError):
        return os.environ.get(GIT_SHA_ENV) or UNKNOWN
    return sha + (DIRTY_SUFFIX if changed else "")


def source_version(fn: Callable) -> str:
    """The git blob id (as `git hash-object` prints it) of `fn`'s source, decorators included.

    A content address: the same text has the same version in every commit, branch and
    revert, and editing one asset changes only that asset's version, not its neighbours'
    in the same file. Code the function calls elsewhere is not included: give such an
    asset an explicit code_version, or bump it, when only a helper changes.
    """
    data = inspect.getsource(inspect.unwrap(fn)).encode()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()[:12]
