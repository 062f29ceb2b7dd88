"""What git says about the code a process runs: its commit, a version per asset, the commits a
revision or range names, and the version a past commit gave an asset's function."""

from __future__ import annotations

import ast
import hashlib
import inspect
import os
import subprocess
from collections.abc import Callable
from functools import cache
from pathlib import Path

from partition_assets.errors import CommitRangeError, UnknownCommitError

GIT_SHA_ENV = "PARTITION_ASSETS_GIT_SHA"
UNKNOWN = "unknown"
DIRTY_SUFFIX = "-dirty"


# The variables that point git at a repository (`git rev-parse --local-env-vars`): set by git for
# the commands it runs (hooks, `git bisect run`), they would override `-C` and make a command
# read, or write, the repository of the process that started this one.
_REPOSITORY_VARIABLES = frozenset(
    {
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
        "GIT_COMMON_DIR",
        "GIT_CONFIG",
        "GIT_DIR",
        "GIT_GRAFT_FILE",
        "GIT_IMPLICIT_WORK_TREE",
        "GIT_INDEX_FILE",
        "GIT_INTERNAL_SUPER_PREFIX",
        "GIT_NO_REPLACE_OBJECTS",
        "GIT_OBJECT_DIRECTORY",
        "GIT_PREFIX",
        "GIT_REPLACE_REF_BASE",
        "GIT_SHALLOW_FILE",
        "GIT_WORK_TREE",
    }
)


def git_environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment without the variables that point git at a repository (so
    that `git -C directory` means that directory's repository), plus `extra`."""
    return {**{k: v for k, v in os.environ.items() if k not in _REPOSITORY_VARIABLES}, **(extra or {})}


def git(directory: str | Path, *args: str) -> str:
    """`git -C directory args...`'s stripped stdout; raises CalledProcessError on failure."""
    return _stdout_of_git(directory, *args).strip()


def _stdout_of_git(directory: str | Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(directory), *args], env=git_environment(), capture_output=True, text=True, check=True
    )
    return done.stdout


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
    return _blob_id(inspect.getsource(inspect.unwrap(fn)).encode())


def _blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()[:12]


def commits_named(directory: str | Path, revision: str) -> frozenset[str]:
    """The full ids of the commits `revision` names in the git repository holding `directory`:
    one commit (any form `git rev-parse` takes: a sha, a prefix, a tag, a branch), or a range
    `A..B`, the commits `git rev-list A..B` lists (those reachable from B and not from A).

    Raises:
        UnknownCommitError: The repository holds no such commit, or `directory` is in no
            repository; nothing was read or written.
        CommitRangeError: In `A..B`, A is no ancestor of B (the range would hold commits of
            another branch, not B's history since A).
    """
    first, dots, last = revision.partition("..")
    ends = [first, last] if dots else [first]
    full = [_commit_id(directory, end, revision) for end in ends]
    if not dots:
        return frozenset(full)
    try:
        git(directory, "merge-base", "--is-ancestor", full[0], full[1])
    except subprocess.CalledProcessError:
        raise CommitRangeError(
            f"--produced-by {revision}: {first} is no ancestor of {last}, so A..B is not B's history since A; "
            f"give the older commit first (e.g. {last}..{first} if that one is older), or a merge base: nothing "
            "was planned"
        ) from None
    return frozenset(git(directory, "rev-list", f"{full[0]}..{full[1]}").split())


def _commit_id(directory: str | Path, name: str, revision: str) -> str:
    try:
        return git(directory, "rev-parse", "--verify", "--quiet", f"{name}^{{commit}}")
    except (subprocess.CalledProcessError, FileNotFoundError):
        raise UnknownCommitError(
            f"--produced-by {revision}: {name!r} is no commit of the git repository holding {directory}; give a "
            "sha (or prefix), tag or branch of that repository (`git log --oneline` lists them): nothing was planned"
        ) from None


def source_version_at(commit: str, fn: Callable) -> str | None:
    """The `source_version` commit `commit` gives `fn` (a function defined at the top of its
    module): its text in that commit's file, decorators included. None when that commit has no
    such file or no top-level function of that name.

    Not guaranteed: the text is taken from the first decorator to the function's last line, as
    `inspect.getsource` takes it for a top-level function; a nested function is not found.
    """
    function = inspect.unwrap(fn)
    path = Path(inspect.getsourcefile(function) or "")
    try:
        top = Path(git(path.parent, "rev-parse", "--show-toplevel"))
        text = git_show(path.parent, f"{commit}:{path.resolve().relative_to(top.resolve()).as_posix()}")
    except (subprocess.CalledProcessError, FileNotFoundError, ValueError):
        return None
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == function.__name__:
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            return _blob_id("".join(text.splitlines(keepends=True)[first - 1 : node.end_lineno]).encode())
    return None


def git_show(directory: str | Path, name: str) -> str:
    """`git show name`'s output, unstripped (a file's text keeps its last newline)."""
    return _stdout_of_git(directory, "show", name)
