"""git in a repository a test made, as a fixed identity commits (no user configuration needed).

Not guaranteed: anything but the `git` on PATH.
"""

import subprocess
from pathlib import Path

from partition_assets.deploy.git import git_environment

GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "test",
    "GIT_AUTHOR_EMAIL": "test@example.com",
    "GIT_COMMITTER_NAME": "test",
    "GIT_COMMITTER_EMAIL": "test@example.com",
}


def git(repo: Path, *args: str) -> str:
    """`git -C repo args`'s output, stripped; CalledProcessError when it fails."""
    done = subprocess.run(
        ["git", "-C", str(repo), *args], env=git_environment(GIT_IDENTITY), capture_output=True, text=True, check=True
    )
    return done.stdout.strip()
