"""What the tests share besides fixtures: code locations (safe_defs, engine_defs, automation_defs,
probe_assets, ui_engine_defs, wall_clock_assets) and helpers (the CLI, polling, readers, instances,
PostgreSQL, `dagster dev`, the staged-backfill lakehouse, processes, scale), for every tier and the
benchmarks.

Processes a test starts run from REPO, so that they import code locations by their dotted names
(`-m tests.support.safe_defs`), as `dagster dev -m` and the engine's workers do.
Not guaranteed: that a helper works outside a checkout of this repository.
"""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
