"""Code pinned to git: commit stamps on every materialization, deploys per commit."""

from partition_assets.deploy.git import GIT_SHA_ENV, git_sha, source_version
from partition_assets.deploy.versioning import (
    GIT_SHA_METADATA,
    GIT_SHA_TAG,
    definitions_git_sha,
    git_sha_metadata,
    with_git_versions,
)

__all__ = [
    "GIT_SHA_ENV",
    "GIT_SHA_METADATA",
    "GIT_SHA_TAG",
    "definitions_git_sha",
    "git_sha",
    "git_sha_metadata",
    "source_version",
    "with_git_versions",
]
