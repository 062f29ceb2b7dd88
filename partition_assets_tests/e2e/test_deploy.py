"""Code locations per git commit, on a real two-commit repository.

The repository holds a tiny code location (no Spark): commit A, then commit B changes
one asset. Runs go through the surfaces a user has: `dagster asset materialize`,
`partition-assets deploy` (a real code server in workspace.yaml), the webserver's
Materialize mutation and `partition-assets backfill run --location`.
"""

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.definitions.data_version import (
    CachingStaleStatusResolver,
    StaleStatus,
)
from dagster._core.workspace.context import WorkspaceProcessContext
from dagster._core.workspace.load_target import WorkspaceFileTarget
from dagster_graphql.client.query import LAUNCH_PIPELINE_EXECUTION_MUTATION
from dagster_graphql.test.utils import execute_dagster_graphql

from partition_assets.backfill.state.record import BACKFILL_ID_TAG
from partition_assets.deploy import (
    GIT_SHA_METADATA,
    GIT_SHA_TAG,
)
from partition_assets.deploy.deployments import deployments, undeploy
from partition_assets_tests.support.git_repo import git
from partition_assets_tests.support.polling import wait_for

pytestmark = pytest.mark.slow

LOCATION = '''
"""A tiny code location stamped with its git commit."""
import json
import os
from pathlib import Path

import dagster as dg

from partition_assets.deploy import git_sha_metadata, with_git_versions
from tiny_location import assets


class JsonIOManager(dg.ConfigurableIOManager):
    """One JSON file per partition; records the commit like this package's IO managers."""

    root: str

    def _path(self, key: dg.AssetKey, partition: str) -> Path:
        return Path(self.root, *key.path, partition + ".json")

    def handle_output(self, context: dg.OutputContext, obj) -> None:
        path = self._path(context.asset_key, context.partition_key)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(obj))
        context.add_output_metadata(git_sha_metadata(context))

    def load_input(self, context: dg.InputContext):
        return json.loads(self._path(context.asset_key, context.asset_partition_key).read_text())


defs = with_git_versions(
    dg.Definitions(
        assets=dg.load_assets_from_modules([assets]),
        resources={"io_manager": JsonIOManager(root=os.environ["TINY_STORE"])},
    ),
    __file__,
)
'''

ASSETS = """
import dagster as dg

from partition_assets.partitions import daily

DAYS = daily("2024-01-01")


@dg.asset(partitions_def=DAYS)
def alpha(context: dg.AssetExecutionContext) -> dict:
    return {{"day": context.partition_key}}


@dg.asset(partitions_def=DAYS)
def beta(alpha: dict) -> dict:
    return {{**alpha, "formula": {formula}}}
"""

WORKSPACE = "load_from:\n  - python_module:\n      module_name: tiny_location\n      location_name: tiny\n"


def commit_assets(repo: Path, formula: int) -> str:
    (repo / "tiny_location" / "assets.py").write_text(ASSETS.format(formula=formula))
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", f"beta formula {formula}")
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def home(home) -> Path:
    """The shared DAGSTER_HOME, without a daemon here: launched runs start at once (no run queue)."""
    (home / "dagster.yaml").write_text(
        "telemetry:\n  enabled: false\n"
        "run_coordinator:\n  module: dagster._core.run_coordinator\n  class: DefaultRunCoordinator\n"
    )
    return home


@pytest.fixture
def repo(tmp_path):
    """A git repository with commits A and B of the tiny location; yields (path, sha_a, sha_b)."""
    repo = tmp_path / "repo"
    (repo / "tiny_location").mkdir(parents=True)
    (repo / "tiny_location" / "__init__.py").write_text(LOCATION)
    (repo / "pyproject.toml").write_text('[tool.dagster]\nmodule_name = "tiny_location"\ncode_location_name = "tiny"\n')
    (repo / "workspace.yaml").write_text(WORKSPACE)
    git(repo, "init", "-q", "-b", "main")
    sha_a = commit_assets(repo, 1)
    sha_b = commit_assets(repo, 2)
    yield repo, sha_a, sha_b
    for deployment in deployments(repo):  # never leave a code server behind
        undeploy(repo, deployment.location)


def run(repo: Path, home: Path, store: Path, *command: str) -> str:
    done = subprocess.run(
        [sys.executable, *command],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "DAGSTER_HOME": str(home), "TINY_STORE": str(store)},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def materializations(home: Path, asset: str) -> dict[str, list[dict]]:
    """Per partition, oldest first: each materialization's run tag, metadata and code version."""
    found: dict[str, list[dict]] = {}
    with dg.DagsterInstance.from_config(str(home)) as instance:
        records = instance.fetch_materializations(dg.AssetKey(asset), limit=100, ascending=True).records
        for record in records:
            event = record.asset_materialization
            found.setdefault(event.partition, []).append(
                {
                    "run_tag": instance.get_run_by_id(record.run_id).tags.get(GIT_SHA_TAG),
                    "metadata": event.metadata[GIT_SHA_METADATA].value,
                    "code_version": event.tags["dagster/code_version"],
                    "run_id": record.run_id,
                }
            )
    return found


def served_assets(request, partition: str) -> dict[str, dict[str, tuple]]:
    """Per location and asset, as the webserver shows them: the code version served, and the
    partition's staleness against the instance."""
    served = {}
    for name in request.code_location_names:
        (repository,) = request.get_code_location(name).get_repositories().values()
        staleness = CachingStaleStatusResolver(request.instance, repository.asset_graph, request)
        served[name] = {
            snap.asset_key.to_user_string(): (snap.code_version, staleness.get_status(snap.asset_key, partition))
            for snap in repository.get_asset_node_snaps()
        }
    return served


def launch_from_webserver(request, location: str, assets: list[str], partition: str) -> str:
    """Sends the webserver's Materialize mutation for `location`; returns the run id."""
    result = execute_dagster_graphql(
        request,
        LAUNCH_PIPELINE_EXECUTION_MUTATION,
        {
            "executionParams": {
                "selector": {
                    "repositoryLocationName": location,
                    "repositoryName": "__repository__",
                    "pipelineName": "__ASSET_JOB",
                    "assetSelection": [{"path": [a]} for a in assets],
                },
                "executionMetadata": {"tags": [{"key": "dagster/partition", "value": partition}]},
            }
        },
    )
    launched = result.data["launchPipelineExecution"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    return launched["run"]["runId"]


def finished_run(instance: dg.DagsterInstance, run_id: str, timeout: float = 180) -> dg.DagsterRun:
    return wait_for(lambda: (run := instance.get_run_by_id(run_id)).is_finished and run, timeout, step=0.3)


def test_each_commit_stamps_its_materializations_and_a_deploy_reruns_the_older(repo, home, tmp_path, monkeypatch):
    repo, sha_a, sha_b = repo
    store = tmp_path / "store"
    monkeypatch.setenv("TINY_STORE", str(store))  # for the HEAD location the workspace loads here
    monkeypatch.chdir(repo)  # where `dagster dev -w workspace.yaml` runs: its python_module resolves here
    materialize = [
        "-m",
        "dagster",
        "asset",
        "materialize",
        "-m",
        "tiny_location",
        "--select",
        "alpha,beta",
        "--partition",
        "2024-01-01",
    ]
    git(repo, "checkout", "-q", sha_a)
    run(repo, home, store, *materialize)
    git(repo, "checkout", "-q", "main")
    at_a = {asset: materializations(home, asset)["2024-01-01"][0] for asset in ("alpha", "beta")}
    assert {(m["run_tag"], m["metadata"]) for m in at_a.values()} == {(sha_a, sha_a)}

    # Deploy A while the checkout is at B: its own worktree, code server and workspace entry.
    run(repo, home, store, "-m", "partition_assets", "deploy", sha_a[:8])
    (deployment,) = deployments(repo)
    assert deployment.location == f"tiny@{sha_a[:12]}"
    assert git(Path(deployment.worktree), "rev-parse", "HEAD") == sha_a
    with (
        dg.DagsterInstance.from_config(str(home)) as instance,
        WorkspaceProcessContext(instance, WorkspaceFileTarget([str(repo / "workspace.yaml")])) as webserver,
    ):
        served = served_assets(webserver.create_request_context(), "2024-01-01")
        ui_run_id = launch_from_webserver(
            webserver.create_request_context(), deployment.location, ["alpha", "beta"], "2024-01-03"
        )
    assert set(served) == {"tiny", deployment.location}
    assert served[deployment.location] == {  # A's code, and A's materializations are current
        "alpha": (at_a["alpha"]["code_version"], StaleStatus.FRESH),
        "beta": (at_a["beta"]["code_version"], StaleStatus.FRESH),
    }
    head_alpha, head_beta = served["tiny"]["alpha"], served["tiny"]["beta"]
    assert head_alpha == (at_a["alpha"]["code_version"], StaleStatus.FRESH)  # alpha's code did not change
    assert head_beta[0] != at_a["beta"]["code_version"] and head_beta[1] == StaleStatus.STALE  # beta's did

    # While the webserver's run executes on A's code server: materialize at B, and backfill on A.
    run(repo, home, store, *materialize)  # at B
    at_b = {asset: materializations(home, asset)["2024-01-01"][1] for asset in ("alpha", "beta")}
    assert {(m["run_tag"], m["metadata"]) for m in at_b.values()} == {(sha_b, sha_b)}
    assert at_b["beta"]["code_version"] == head_beta[0]

    out = run(
        repo,
        home,
        store,
        "-m",
        "partition_assets",
        "backfill",
        "run",
        "--location",
        deployment.location,
        "--select",
        "key:alpha or key:beta",
        "--start",
        "2024-01-02",
        "--end",
        "2024-01-02",
        "--max-parallel",
        "1",
    )
    backfill_id = out.split()[1].rstrip(":")
    (rerun,) = materializations(home, "beta")["2024-01-02"]
    assert (rerun["run_tag"], rerun["metadata"], rerun["code_version"]) == (sha_a, sha_a, at_a["beta"]["code_version"])
    with dg.DagsterInstance.from_config(str(home)) as instance:
        assert instance.get_run_by_id(rerun["run_id"]).tags[BACKFILL_ID_TAG] == backfill_id
        from_ui = finished_run(instance, ui_run_id)
    assert (store / "beta" / "2024-01-02.json").read_text() == '{"day": "2024-01-02", "formula": 1}'

    # The webserver's run on A's location is A's code too.
    assert from_ui.status == dg.DagsterRunStatus.SUCCESS and from_ui.tags[GIT_SHA_TAG] == sha_a
    (in_ui,) = materializations(home, "beta")["2024-01-03"]
    assert (in_ui["metadata"], in_ui["code_version"]) == (sha_a, at_a["beta"]["code_version"])
    assert (store / "beta" / "2024-01-03.json").read_text() == '{"day": "2024-01-03", "formula": 1}'

    run(repo, home, store, "-m", "partition_assets", "undeploy", deployment.location)
    assert deployments(repo) == [] and not Path(deployment.worktree).exists()
    assert not deployment.is_serving()
    assert (repo / "workspace.yaml").read_text() == WORKSPACE  # as it was, byte for byte
