"""`--code-root` / `--location`: run a `partition-assets` command on a deploy's code.

The command runs again in a fresh interpreter whose import path starts with the code
root (and not the current directory), so the code location, and everything it imports
that the root holds, comes from that commit. Coordinator, workers and their runs all
see the same code, as the deploy's code server does.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from partition_assets.code_location import configured_module
from partition_assets.deploy.deployments import find_deployment, repo_root
from partition_assets.errors import CodeLocationError


def exec_in_code_root(args: argparse.Namespace, argv: list[str]) -> None:
    """Replaces this process by `partition-assets argv` importing from the code root; returns
    if no code root was asked for."""
    root, module = None, None
    if getattr(args, "location", None):
        deployment = find_deployment(repo_root(), args.location)
        root, module = Path(deployment.worktree), deployment.module
    elif getattr(args, "code_root", None):
        root = Path(args.code_root).resolve()
        if not root.is_dir():
            raise CodeLocationError(f"--code-root {args.code_root}: no such folder; give a deploy's worktree")
    if root is None:
        return
    argv = _without_code_root(argv)
    takes_location = getattr(args, "action", None) in ("plan", "run")
    if takes_location and not (args.module_name or args.python_file or args.workspace):
        argv += ["-m", module or configured_module(root)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), *filter(None, [os.environ.get("PYTHONPATH")])])}
    sys.stdout.flush()
    # -P: the current directory (the repo at another commit) must not shadow the root.
    os.execve(sys.executable, [sys.executable, "-P", "-m", "partition_assets", *argv], env)


def _without_code_root(argv: list[str]) -> list[str]:
    kept, skip = [], False
    for token in argv:
        if skip:
            skip = False
        elif token in ("--code-root", "--location"):
            skip = True
        elif not token.startswith(("--code-root=", "--location=")):
            kept.append(token)
    return kept
