"""Materializations stamped with the git commit of their code, in this process: this checkout's
commit and its dirty state, explicit code versions (a deploy per commit, run through the
CLI and the webserver: partition_assets_tests/e2e/test_deploy.py)."""

import dataclasses
import subprocess
import sys

import dagster as dg

from partition_assets.cli.main import main
from partition_assets.deploy import (
    GIT_SHA_ENV,
    GIT_SHA_METADATA,
    GIT_SHA_TAG,
    git_sha,
    source_version,
    with_git_versions,
)
from partition_assets.deploy.deployments import DEPLOYS_DIR, Deployment, deployments, save_deployment
from partition_assets.processes.identity import ProcessIdentity
from partition_assets_tests.support import REPO
from partition_assets_tests.support.git_repo import git
from partition_assets_tests.support.locations import probe_assets


def test_delta_io_manager_records_the_commit_of_this_checkout(run_assets, instance, spark):
    defs = with_git_versions(dg.Definitions(assets=[probe_assets.numbers]), probe_assets.__file__)
    result = run_assets(defs.assets, "numbers", partition_key="2024-01-01", raise_on_error=True)

    sha = git_sha(REPO)
    assert sha.split("-")[0] == git(REPO, "rev-parse", "HEAD")
    (event,) = result.asset_materializations_for_node("numbers")
    assert event.metadata[GIT_SHA_METADATA].value == sha
    assert event.tags["dagster/code_version"] == source_version(probe_assets.numbers.op.compute_fn.decorated_fn)
    assert instance.get_run_by_id(result.run_id).tags[GIT_SHA_TAG] == sha


def test_explicit_code_versions_win_and_graph_backed_assets_are_stamped_too(instance, tmp_path):
    @dg.asset(code_version="v7")
    def pinned() -> int:
        return 1

    @dg.op
    def double(pinned: int) -> int:
        return 2 * pinned

    @dg.graph_asset
    def doubled(pinned: int) -> int:
        return double(pinned)

    defs = with_git_versions(dg.Definitions(assets=[pinned, doubled]), __file__)
    graph = defs.resolve_asset_graph()
    assert graph.get(pinned.key).code_version == "v7"
    assert graph.get(doubled.key).code_version is None  # no single function to version
    result = dg.materialize(
        defs.assets, instance=instance, resources={"io_manager": dg.FilesystemIOManager(base_dir=str(tmp_path))}
    )
    assert instance.get_run_by_id(result.run_id).tags[GIT_SHA_TAG] == git_sha(REPO)
    assert all(graph.get(key).metadata[GIT_SHA_METADATA] == git_sha(REPO) for key in (pinned.key, doubled.key))


def test_git_sha_marks_changed_python_files_dirty_and_falls_back_outside_git(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "lib.py").write_text("x = 1\n")
    (repo / "workspace.yaml").write_text("load_from: []\n")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "one")
    head = git(repo, "rev-parse", "HEAD")

    def sha() -> str:
        git_sha.cache_clear()  # read once per process; here the tree changes under it
        return git_sha(repo / "pkg")

    assert sha() == head
    (repo / "workspace.yaml").write_text("load_from: [x]\n")  # e.g. a deploy registering itself
    assert sha() == head
    (repo / "lib.py").write_text("x = 2\n")  # a Python file outside the location's folder
    assert sha() == f"{head}-dirty"

    outside = tmp_path / "image"
    outside.mkdir()
    monkeypatch.delenv(GIT_SHA_ENV, raising=False)
    assert git_sha(outside) == "unknown"
    monkeypatch.setenv(GIT_SHA_ENV, head)
    git_sha.cache_clear()
    assert git_sha(outside) == head


def test_git_reads_the_repository_it_names_when_git_points_the_process_at_another(tmp_path, monkeypatch):
    """Under a git hook or `git bisect run`, GIT_DIR names the outer repository: the library's
    git commands (and the tests' own) still read, and write, the repository they name."""
    outer, inner = tmp_path / "outer", tmp_path / "inner"
    for repo, name in ((outer, "outer"), (inner, "inner")):
        repo.mkdir()
        (repo / f"{name}.py").write_text("x = 1\n")
        git(repo, "init", "-q")
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", name)
    inner_head, outer_head = git(inner, "rev-parse", "HEAD"), git(outer, "rev-parse", "HEAD")
    monkeypatch.setenv("GIT_DIR", str(outer / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(outer))
    git_sha.cache_clear()
    assert git_sha(inner) == inner_head != outer_head
    git(inner, "commit", "-q", "--allow-empty", "-m", "two")  # the tests' helper commits where it says
    monkeypatch.delenv("GIT_DIR")
    monkeypatch.delenv("GIT_WORK_TREE")
    assert git(outer, "rev-parse", "HEAD") == outer_head
    assert git(inner, "rev-parse", "HEAD") != inner_head


# A process listening on a port, which it prints: what took a dead code server's pid and port.
LISTENER = """
import socket, sys, time
listener = socket.create_server(("127.0.0.1", 0))
print(listener.getsockname()[1], flush=True)
time.sleep(300)
"""


def test_a_deploy_whose_pid_and_port_another_process_took_is_down_and_never_signalled(tmp_path, monkeypatch, capsys):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "workspace.yaml").write_text("load_from: []\n")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "one")
    sha = git(repo, "rev-parse", "HEAD")
    worktree = repo / DEPLOYS_DIR / sha[:12]
    git(repo, "worktree", "add", "-q", "--detach", str(worktree), sha)
    location = f"shop@{sha[:12]}"
    # Its command line names the location, as a code server's does: only the start time tells them apart.
    other = subprocess.Popen(
        [sys.executable, "-c", LISTENER, "--location-name", location], stdout=subprocess.PIPE, text=True
    )
    try:
        port = int(other.stdout.readline())
        # The recorded server ended; the kernel gave its pid to `other`, which listens on its port.
        taken = ProcessIdentity.of_pid(other.pid)
        assert taken.started is not None
        recorded = dataclasses.replace(taken, started=taken.started - 1)
        save_deployment(
            repo,
            Deployment(
                sha,
                location,
                "shop.definitions",
                port,
                other.pid,
                str(worktree),
                str(repo / "workspace.yaml"),
                str(repo / DEPLOYS_DIR / f"{sha[:12]}.log"),
                server=recorded,
            ),
        )
        monkeypatch.chdir(repo)

        assert main(["deploys"]) == 0
        assert f"pid {other.pid}  DOWN" in capsys.readouterr().out
        assert main(["undeploy", location]) == 0
        assert other.poll() is None, "undeploy signalled another process"
        assert deployments(repo) == [] and not worktree.exists()
    finally:
        other.kill()
        other.wait()
