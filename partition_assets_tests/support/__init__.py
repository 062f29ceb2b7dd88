"""What the tests share besides fixtures, for every tier and the benchmarks: the code locations
they load, in locations/ (its __init__ lists them), and, here, helpers: the CLI (cli_runs),
instances and DAGSTER_HOMEs (instances), the backfill records an instance holds (records), the
webserver's launch dialog's backfills (ui_backfills), PostgreSQL (postgres),
`dagster dev` (webserver), a `--runs-via launcher` backfill's runs
(launched_runs), the staged-backfill lakehouse (lakehouse), the example's tables
(example_tables), independent readers (readers), polling (polling), processes from /proc
(processes), a coordinator in a pid namespace of its own (pid_namespaces), vacuum retention
(retention), in-process run results (results), git repositories (git_repo) and the
coordinator at scale (scale).

Processes a test starts run from REPO, so that they import code locations by their dotted names
(`-m partition_assets_tests.support.locations.safe_defs`), as `dagster dev -m` and the engine's workers do.
Not guaranteed: that a helper works outside a checkout of this repository.
"""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
