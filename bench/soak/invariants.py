"""The soak's invariants, checked once its backfill published and production and the readers
stopped; each gives (held, a sentence saying what was checked or what broke):

- final_tables: each Delta table of the DAG holds exactly generation 2 of the backfill's days
  (its rows computed from the partition keys, soak_defs.expected_rows) and production's rows
  on the days it wrote, nothing else: what an undisturbed run leaves;
- no_concurrent_runs: no two Dagster runs of the backfill for the same node overlapped in
  time (a run killed with its process ends when the instance marked it ended);
- no_mixed_release: no library reader's join mixed generations or read a row its
  generation does not compute; and the readers saw both generations (they read across the publish);
- records_agree: per table and partition of the backfill, the ledger says published at the
  version the backfill's release records, Delta's log holds that version with generation 2
  on every day, and the instance's latest materialization names the ledger's run as the one
  that staged it;
- nothing_held: no lease on any table, no run of the instance left unfinished, no pool slot
  claimed, no coordinator announced;
- faults_named: each fault that hit something is answered in the backfill's log (what the
  commands that drove it printed) by a line naming what the product saw, and by a recovery.

Not guaranteed: checked at the end only (the readers check theirs as they read).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import dagster as dg

from bench.soak import soak_defs

NOT_ENDED = (
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
)
# What the backfill's log (the output of the commands that drove it) says after each kind of
# fault that hit something: the line of the product (or of Dagster) naming what it saw.
NAMED_BY = {
    "coordinator": r"its coordinator was lost .* takes it over",
    "process_group": r"its coordinator was lost .* takes it over",
    "fork_server": r"its worker process died",
    "node_run": r"its worker process died",
    # The coordinator's line once it is gone for good; the run that started it again; or the
    # failed runs whose calls were on it.
    "spark_server": r"(Spark (Connect )?server .* is gone|FAILED: SparkConnect\w*Exception)",
    # Dagster's retry, a worker's kept connection replaced, or the coordinator riding it out.
    "postgres": (
        r"(Retrying failed database connection|kept database connection was closed"
        r"|instance's database is unreachable)"
    ),
    "command_server": None,  # a served command outlives its server: nothing happens to the backfill
}


@dataclass
class Evidence:
    root: Path
    home: Path
    lake: Path
    backfill_id: str
    days: int
    first: str
    last: str
    injected: list  # soak.Injected


def _instance(evidence: Evidence) -> dg.DagsterInstance:
    return dg.DagsterInstance.from_config(str(evidence.home))


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _row_set(rows: list[dict]) -> frozenset:
    return frozenset(tuple(sorted(row.items())) for row in rows)


def _partitions(evidence: Evidence, asset: str) -> list[str]:
    from datetime import date, timedelta

    days = [(date.fromisoformat(evidence.first) + timedelta(days=i)).isoformat() for i in range(evidence.days)]
    if asset.startswith("month"):
        return sorted({day[:8] + "01" for day in days})
    return days


def final_tables(evidence: Evidence) -> tuple[bool, str]:
    from partition_assets_tests.support.readers import delta_row_set

    produced = {line["day"] for line in _lines(evidence.root / "production.jsonl") if line.get("ok")}
    wrong = []
    for asset in soak_defs.stored_assets():
        expected = [row for p in _partitions(evidence, asset) for row in soak_defs.expected_rows(asset, p, "2")]
        if asset in soak_defs.JOINED:
            expected += [row for day in produced for row in soak_defs.expected_rows(asset, day, "prod")]
        found = delta_row_set(evidence.lake / asset)
        if found != _row_set(expected):
            extra, missing = found - _row_set(expected), _row_set(expected) - found
            wrong.append(f"{asset}: {len(extra)} rows extra ({sorted(extra)[:2]}), {len(missing)} missing")
    if wrong:
        return False, "; ".join(wrong)
    return True, (
        f"{len(soak_defs.stored_assets())} tables equal generation 2 of {evidence.days} days plus production's "
        f"{len(produced)} days"
    )


def no_concurrent_runs(evidence: Evidence) -> tuple[bool, str]:
    from partition_assets.run_tags import BACKFILL_ID_TAG

    by_node: dict[tuple[str, str], list[tuple[float, float, str]]] = {}
    with _instance(evidence) as instance:
        records = instance.get_run_records(dg.RunsFilter(tags={BACKFILL_ID_TAG: evidence.backfill_id}))
    for record in records:
        run = record.dagster_run
        end = record.end_time or record.update_timestamp.timestamp()
        start = record.start_time or record.create_timestamp.timestamp()
        for asset in run.asset_selection or ():
            node = (asset.to_user_string(), run.tags.get("dagster/partition", ""))
            by_node.setdefault(node, []).append((start, end, run.run_id))
    overlaps = []
    for node, spans in by_node.items():
        spans.sort()
        for (_, end, first), (start, _, second) in zip(spans, spans[1:], strict=False):
            if start < end:
                overlaps.append(f"{node}: {first} and {second}")
    reran = sum(len(spans) - 1 for spans in by_node.values())
    if overlaps:
        return False, f"runs of one node overlapped: {overlaps[:5]}"
    return True, f"{len(records)} runs of {len(by_node)} nodes ({reran} runs again after a fault), none overlapping"


def no_mixed_release(evidence: Evidence) -> tuple[bool, str]:
    reads = [line for line in _lines(evidence.root / "reader.jsonl") if "generations" in line]
    errors = [line["error"] for line in _lines(evidence.root / "reader.jsonl") if "error" in line]
    mixed = [line for line in reads if line["mixed"] or line["wrong_rows"]]
    pairs = {json.dumps([line["versions"], line["generations"]], sort_keys=True) for line in reads}
    seen = {gen for line in reads for gens in line["generations"].values() for gen in gens}
    detail = (
        f"{len(reads)} reads, {len(pairs)} distinct (versions, generations) pairs, generations seen {sorted(seen)}, "
        f"{len(errors)} reads refused ({sorted(set(e.split(':')[0] for e in errors))})"
    )
    if mixed:
        return False, f"{len(mixed)} reads mixed generations or read wrong rows, first {mixed[0]}; {detail}"
    if not {"1", "2"} <= seen:
        return False, f"the readers did not read across the publish; {detail}"
    return True, detail


def records_agree(evidence: Evidence) -> tuple[bool, str]:
    from deltalake import DeltaTable

    from partition_assets import backfill_ledger
    from partition_assets.storage.release_log import read_log

    releases = [r for r in read_log(str(evidence.lake)).releases() if r.backfill_id == evidence.backfill_id]
    if len(releases) != 1:
        return False, f"{len(releases)} releases of the backfill in the release log, not 1"
    release = releases[0]
    wrong = []
    with _instance(evidence) as instance:
        ledger = {(e.asset, e.partition): e for e in backfill_ledger(instance, evidence.backfill_id).entries}
        for asset in soak_defs.stored_assets():
            version = release.versions.get(asset)
            if version is None:
                wrong.append(f"the release does not name {asset}")
                continue
            rows = (
                DeltaTable(str(evidence.lake / asset), version=version).to_pyarrow_dataset().to_table(use_threads=False)
            )
            at_release = {row["ds"]: row["gen"] for row in rows.to_pylist()}
            for partition in _partitions(evidence, asset):
                entry = ledger.get((asset, partition))
                if entry is None or entry.status.value != "published" or entry.published_version != version:
                    wrong.append(f"{asset} {partition}: ledger {entry and entry.to_json()} vs release v{version}")
                    continue
                if at_release.get(partition) != "2":
                    wrong.append(f"{asset} {partition}: generation {at_release.get(partition)} at v{version}")
                records = instance.fetch_materializations(
                    dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[partition]), limit=1
                ).records
                staged_by = _staged_by(records[0]) if records else None
                if staged_by != entry.run_id:
                    wrong.append(
                        f"{asset} {partition}: latest materialization staged by {staged_by}, not {entry.run_id}"
                    )
    if wrong:
        return False, f"{len(wrong)} disagreements, first {wrong[:3]}"
    return True, f"release {release.release_id} at {dict(release.versions)}; ledger, Delta logs and instance agree"


def _staged_by(record) -> str | None:
    """The node run the publish names in a materialization it recorded (dagster_events.py)."""
    materialization = record.event_log_entry.asset_materialization
    value = materialization.metadata.get("staged_by_run") if materialization else None
    return None if value is None else str(value.value)


def nothing_held(evidence: Evidence) -> tuple[bool, str]:
    from partition_assets.backfill.state.presence import live_coordinator
    from partition_assets.storage.leases import leases

    held = [
        f"{asset}: {lease.holder}"
        for asset in soak_defs.stored_assets()
        for lease in leases(str(evidence.lake / asset))
    ]
    with _instance(evidence) as instance:
        # Named with what tells whose run it was (a node of the backfill, production, the publish).
        unfinished = [
            f"{run.run_id} ({run.status.value}, job {run.job_name}, tags {dict(sorted(run.tags.items()))})"
            for run in instance.get_runs(dg.RunsFilter(statuses=list(NOT_ENDED)))
        ]
        coordinator = live_coordinator(instance, evidence.backfill_id)
        slots = {
            pool: info.claimed_slots
            for pool in instance.event_log_storage.get_concurrency_keys()
            for info in [instance.event_log_storage.get_concurrency_info(pool)]
            if info.claimed_slots
        }
    problems = [*held, *(f"run {r} not ended" for r in unfinished), *(f"pool {p} claimed" for p in slots)]
    if coordinator is not None:
        problems.append(f"coordinator still announced: {coordinator}")
    # Production's own runs Dagster's materialize raised out of, unended, which it ended (actors.py).
    cut = sum(1 for line in _lines(evidence.root / "production.jsonl") if "ended_unstarted" in line)
    held_nothing = "no lease, unfinished run, pool slot or coordinator left"
    return (not problems), (
        "; ".join(problems) or f"{held_nothing} (production ended {cut} of its runs materialize raised out of)"
    )


def faults_named(evidence: Evidence) -> tuple[bool, str]:
    """Per line of NAMED_BY, at least as many matches in the backfill's log (its commands' output
    and its runs' captured stderr) as faults of its kinds hit something while this release ran
    the backfill (lines carry no time: a count, not a place), and every fault that hit recovered."""
    log = (evidence.root / "backfill.log").read_text() if (evidence.root / "backfill.log").exists() else ""
    # And its node runs' captured output (the webserver's run view): a line a run logs, such as
    # the local Spark server started again by the run that found it gone, is there.
    log += "".join(
        path.read_text(errors="replace") for path in (evidence.home / "storage").glob("*/compute_logs/*.err")
    )
    hit = [fault for fault in evidence.injected if fault.hit is not None]
    # A fault that hit the previous release (the upgrade step) is named in its words, if at all:
    # the lines below are this release's; it must still be recovered.
    ours = [fault for fault in hit if fault.previous_release is None]
    problems = []
    for pattern in {p for p in NAMED_BY.values() if p is not None}:
        kinds = sorted(kind for kind, named in NAMED_BY.items() if named == pattern)
        faults = [fault for fault in ours if fault.kind in kinds]
        found = len(re.findall(pattern, log))
        if found < len(faults):
            problems.append(f"{'/'.join(kinds)}: {len(faults)} faults, {found} lines matching {pattern!r}")
    problems += [f"{f.kind} at +{f.at:.0f}s not recovered" for f in hit if not f.recovered_by]
    if problems:
        return False, "; ".join(problems)
    older = (
        f" ({len(hit) - len(ours)} hit the previous release: recovered, not required named)"
        if len(ours) < len(hit)
        else ""
    )
    return True, f"{len(hit)} faults hit, each named in the backfill's log and recovered{older}"


CHECKS = {
    "final_tables": final_tables,
    "no_concurrent_runs": no_concurrent_runs,
    "no_mixed_release": no_mixed_release,
    "records_agree": records_agree,
    "nothing_held": nothing_held,
    "faults_named": faults_named,
}


def check_all(evidence: Evidence) -> dict[str, tuple[bool, str]]:
    results = {}
    for name, check in CHECKS.items():
        try:
            results[name] = check(evidence)
        except Exception as error:  # a check that cannot run is a finding, reported with the rest
            results[name] = (False, f"could not be checked: {type(error).__name__}: {error}")
    return results
