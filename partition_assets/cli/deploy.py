"""`partition-assets deploy SHA | deploys | undeploy NAME`: code locations per git commit."""

import argparse
from pathlib import Path

from partition_assets.cli.help_text import add_command


def add_deploy_commands(commands: argparse._SubParsersAction) -> None:
    start = add_command(
        commands,
        "deploy",
        "serve the code at a git commit as its own code location",
        ("deploy HEAD~3", "deploy 3f2a1c9 --name orders@fix"),
    )
    start.add_argument("sha", help="a commit (any revision git understands: SHA, tag, HEAD~3)")
    start.add_argument("-m", "--module-name", help="code location module (default: [tool.dagster] module_name)")
    start.add_argument("--name", help="location name (default: <code_location_name>@<sha12>)")
    start.add_argument("--port", type=_port, help="code server port (default: a free one)")
    start.add_argument("--workspace", type=Path, help="workspace file to register in (default: <repo>/workspace.yaml)")
    add_command(commands, "deploys", "list deployed commits", ("deploys",))
    stop = add_command(
        commands, "undeploy", "stop a deploy, unregister it, remove its worktree", ("undeploy example@1a2b3c4d5e6f",)
    )
    stop.add_argument("name", help="location name or commit prefix")


def run_deploy_command(args: argparse.Namespace) -> int:
    """Runs `deploy`, `deploys` or `undeploy`; a bad input raises DeployError."""
    # Imported when run: the parser (`--help`) loads no Dagster (cli/main.py).
    from partition_assets.deploy.deployments import deploy, deployments, repo_root, undeploy

    repo = repo_root()
    if args.command == "deploy":
        done = deploy(
            repo, args.sha, module=args.module_name, location=args.name, port=args.port, workspace=args.workspace
        )
        print(
            f"deployed {done.location}: {done.module} from {done.worktree}, "
            f"code server 127.0.0.1:{done.port} (pid {done.pid}), registered in {done.workspace}"
        )
    elif args.command == "deploys":
        if not deployments(repo):
            print(f"no deploys under {repo}")
        for d in deployments(repo):
            state = "serving" if d.is_serving() else "DOWN"
            print(f"{d.location:<32} {d.sha}  port {d.port}  pid {d.pid}  {state}  {d.worktree}")
    else:
        done = undeploy(repo, args.name)
        print(f"undeployed {done.location}")
    return 0


def _port(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a TCP port: give 1..65535, or leave it out for a free one")
    return int(text)
