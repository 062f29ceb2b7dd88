"""100,000 partitions per asset (issue 54, part 2), at a size the suite can afford: the bench's
code location (bench/huge_asset_defs.py; the bench itself: bench/huge_asset_bench.py) over two
years, an hourly asset of 17,544 partitions (more than the 10,000 records Dagster fetches in one
call) and its daily child, every partition materialized but those of 1% of the days (events
written in batches through the instance, as the bench writes them). `--catch-up` plans them,
runs exactly them, publishes exactly them, and `status` reads them, each as a user types it; the
record keeps the current partitions as runs, in a size that follows the gaps, not the history."""

from __future__ import annotations

import gc
import json
import re
import tracemalloc
from collections import Counter
from collections.abc import Callable
from typing import TypeVar

import dagster as dg

from bench.history_selection_bench import write_events
from bench.huge_asset_defs import YEARS_ENV, all_days, definitions, history, missing_days
from partition_assets.backfill.planning.instance_state import current_nodes
from partition_assets.backfill.state.record import finished_nodes
from partition_assets.backfill.state.store import BackfillStore
from partition_assets.backfill.state.stored_plan import recorded_graph
from partition_assets.run_tags import BACKFILL_ID_TAG, partitions_of_run
from partition_assets_tests.support.cli_runs import backfill_cli, ok
from partition_assets_tests.support.older_releases import stored_body

YEARS = 2
DEFS = "bench/huge_asset_defs.py"
HOURS, DAYS = dg.AssetKey("hours"), dg.AssetKey("days")
_T = TypeVar("_T")


def test_a_catch_up_over_two_years_of_hours_runs_publishes_and_reports_exactly_the_missing_days(home, monkeypatch):
    monkeypatch.setenv(YEARS_ENV, str(YEARS))
    asset_graph = definitions(YEARS).resolve_asset_graph()
    every = {key: set(asset_graph.get(key).partitions_def.get_partition_keys()) for key in (HOURS, DAYS)}
    gone = missing_days(YEARS)
    missing = {
        HOURS: {f"{day}-{hour:02d}:00" for day in gone for hour in range(24)},
        DAYS: {str(day) for day in gone},
    }
    assert len(every[HOURS]) > 10_000 and len(missing[HOURS]) == 8 * 24
    made = history(YEARS)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        write_events(instance, made)
        seeded = instance.event_log_storage.get_maximum_record_id()
    days = all_days(YEARS)
    whole = ["-f", DEFS, "--select", "*", "--start", str(days[0]), "--end", str(days[-1])]

    planned = ok(backfill_cli(home, "plan", *whole, "--catch-up"))
    total = len(every[HOURS]) + len(every[DAYS])
    assert f"catch-up: {len(made)} of {total} nodes are current and would be skipped" in planned

    output = ok(backfill_cli(home, "run", *whole, "--catch-up"))
    backfill_id = re.search(r"^backfill (\w+): \d+ nodes, (\d+) already done", output, re.M)
    assert backfill_id and int(backfill_id.group(2)) == len(made), output
    with dg.DagsterInstance.from_config(str(home)) as instance:
        ran = _partitions_run(instance, asset_graph, backfill_id.group(1))
        published = {
            key: {
                record.partition_key
                for record in instance.fetch_materializations(
                    dg.AssetRecordsFilter(asset_key=key, after_storage_id=seeded), limit=1000
                ).records
            }
            for key in (HOURS, DAYS)
        }
        materialized = {key: instance.get_materialized_partitions(key) for key in (HOURS, DAYS)}
    assert ran == missing  # one run per missing block and asset, nothing else
    assert published == missing
    assert materialized == every

    with dg.DagsterInstance.from_config(str(home)) as instance:
        skipped = json.dumps(stored_body(instance, backfill_id.group(1))["skipped"])
    # Runs of partitions per asset (backfill/state/skipped_ranges.py): listed, the 17,352 current
    # hours and 723 days took 350 kB; as runs, their size follows the 8 gaps, not the history.
    assert len(skipped) < 1_000, len(skipped)

    status = ok(backfill_cli(home, "status", backfill_id.group(1)))
    for key in (HOURS, DAYS):
        row = re.search(
            rf"^{key.to_user_string()} .*\b(\d+) current \(skipped by --catch-up\), (\d+) succeeded$", status, re.M
        )
        assert row, status
        assert (int(row.group(1)), int(row.group(2))) == (len(every[key] - missing[key]), len(missing[key])), status
    assert "failed" not in status.split("\n", 2)[-1]

    # What the planner (current_nodes) and a resumed run (finished_nodes: the engine's done set,
    # its mirror's, `status`'s) hold for the 18,275 current nodes: their runs, not a node each
    # (a set of them held 3.9 MB).
    with dg.DagsterInstance.from_config(str(home)) as instance:
        record = BackfillStore(instance).load(backfill_id.group(1))
        graph = recorded_graph(record, instance)
        current_nodes(graph, instance)  # the provenance index brought up to date, caches warm
        for held_by in (lambda: current_nodes(graph, instance), lambda: finished_nodes(record, graph, instance)):
            held, nodes = _bytes_held(held_by)
            assert held < 200_000, held
            assert len(nodes) == total and Counter(node.asset for node in nodes) == {k: len(every[k]) for k in every}


def _bytes_held(make: Callable[[], _T]) -> tuple[int, _T]:
    """What `make()` returns, and the bytes allocated by it that stay allocated while it is held."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        made = make()
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before, made
    finally:
        tracemalloc.stop()


def _partitions_run(instance: dg.DagsterInstance, asset_graph, backfill_id: str) -> dict[dg.AssetKey, set[str]]:
    """Per asset, the partitions the backfill's node runs covered."""
    ran: dict[dg.AssetKey, set[str]] = {HOURS: set(), DAYS: set()}
    for run in instance.get_runs(dg.RunsFilter(tags={BACKFILL_ID_TAG: backfill_id})):
        for key in run.asset_selection or ():  # none: its publish run
            ran[key] |= set(partitions_of_run(run, asset_graph.get(key).partitions_def))
    return ran
