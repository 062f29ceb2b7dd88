"""What runs beside the soak's backfill, each a process of its own, each until the file
$SOAK_STOP_FILE exists (checked between two runs or reads: a signal would interrupt a Dagster
run in flight, which Dagster turns into an interrupt, and one cut before it started is left
NOT_STARTED for good), each appending one JSON line per thing it did to the file it is given:

- `production <out> <day>...`: every PRODUCTION_PAUSE seconds, a Dagster run (`dg.materialize`
  on the instance of $DAGSTER_HOME, as a schedule's run would be) of the soak's daily Delta
  tables `src0` and `total0` for the next of `day`s (outside the backfill's range), with
  $SOAK_GENERATION=prod; a line per run: its day, whether it succeeded, its error. A run that
  `materialize` raised out of (the database restarted under it) may be left unended: its
  RUN_START event never written, Dagster leaves it NOT_STARTED for good. Production ends it
  as Dagster's run monitoring ends a launched run that never started (`report_run_failed`),
  at its next turn, or at a later one while the database is still away; a line per run so ended;
- `reader <out> <lake> <first day> <last day>`: in a loop, a library reader joining `src0`
  and `total0` on the day at one release (`pinned_versions`, then `read_tables` at that pin's
  release log version); a line per read: the versions pinned, the release, the generations
  each table holds on the backfill's days, whether the join mixed generations (a release
  half-seen), and the rows whose values are not the ones their generation computes.

Not guaranteed: the cadence (a loaded machine reads less often); a reader's error (a table
not released yet, the lake mid-vacuum) is recorded as such, not as an observation.
"""

import json
import os
import sys
import time
from pathlib import Path

# This checkout's package and bench modules, whatever the working directory.
sys.path[:0] = [str(Path(__file__).resolve().parents[2])]

from bench.soak.soak_defs import JOINED, expected_rows

PRODUCTION_PAUSE = 3.0
# Tags each production run with its turn, by which a run `materialize` raised out of is found.
PRODUCTION_TURN_TAG = "soak/production_turn"
READER_PAUSE = 0.2
STOP_FILE_ENV = "SOAK_STOP_FILE"


def _stopping() -> bool:
    return Path(os.environ[STOP_FILE_ENV]).exists()


def _append(out: Path, record: dict) -> None:
    with out.open("a") as file:
        file.write(json.dumps({"t": time.time(), **record}) + "\n")


def production(out: Path, days: list[str]) -> None:
    import dagster as dg

    from bench.soak.soak_defs import soak_definitions

    defs = soak_definitions()
    assets = [asset for asset in defs.assets or () if isinstance(asset, dg.AssetsDefinition)]
    turn = 0
    cut: list[str] = []  # the turns whose run `materialize` raised out of, their runs not known ended
    while not _stopping():
        day = days[turn % len(days)]
        turn += 1
        name = f"{os.getpid()}-{turn}"
        try:
            with dg.DagsterInstance.get() as instance:
                cut = _end_cut_runs(instance, cut, out)
                result = dg.materialize(
                    assets,
                    selection=list(JOINED),
                    partition_key=day,
                    instance=instance,
                    resources=dict(defs.resources or {}),
                    tags={PRODUCTION_TURN_TAG: name},
                    raise_on_error=False,
                )
            _append(out, {"day": day, "ok": result.success, "error": None if result.success else _failure(result)})
        except Exception as error:  # Postgres or Spark down: production's run fails; it tries again
            cut.append(name)
            _append(out, {"day": day, "ok": False, "error": f"{type(error).__name__}: {str(error)[:300]}"})
        time.sleep(PRODUCTION_PAUSE)
    with dg.DagsterInstance.get() as instance:
        _end_cut_runs(instance, cut, out)


def _end_cut_runs(instance, turns: list[str], out: Path) -> list[str]:
    """Ends the unended runs of production's `turns` (see the module docstring); returns the
    turns whose runs it could not read or end (the database still away), for a later turn."""
    import dagster as dg

    from partition_assets.run_tags import IN_FLIGHT_STATUSES

    if not turns:
        return []
    try:
        # By status and the tags of the run's record: a run cut between Dagster's two inserts has
        # none in the instance's tag index.
        for run in instance.get_runs(dg.RunsFilter(statuses=list(IN_FLIGHT_STATUSES))):
            if run.tags.get(PRODUCTION_TURN_TAG) in turns:
                instance.report_run_failed(run, message="production's run was cut: materialize raised out of it")
                _append(out, {"ended_unstarted": run.run_id, "status_was": run.status.value})
    except Exception:  # the database is still away: a later turn ends them
        return turns
    return []


def _failure(result) -> str:
    for event in result.all_events:
        if event.is_failure and event.step_failure_data is not None:
            return event.step_failure_data.error.message.splitlines()[0][:300]
    return "failed"


def reader(out: Path, lake: str, first: str, last: str) -> None:
    from partition_assets import pinned_versions, read_tables

    while not _stopping():
        try:
            pin = pinned_versions(lake, JOINED)
            frames = read_tables(lake, JOINED, log_version=pin.log_version)
        except Exception as error:
            _append(out, {"error": f"{type(error).__name__}: {str(error).splitlines()[0][:300]}"})
            time.sleep(READER_PAUSE)
            continue
        generations, wrong = {}, 0
        for table, frame in frames.items():
            rows = [row for row in frame.to_pylist() if first <= row["ds"] <= last]
            generations[table] = sorted({row["gen"] for row in rows})
            wrong += sum(1 for row in rows if [row] != expected_rows(table, row["ds"], row["gen"]))
        mixed = len({gen for gens in generations.values() for gen in gens}) > 1
        _append(
            out,
            {
                "versions": dict(pin.versions),
                "release": None if pin.release is None else pin.release.release_id,
                "generations": generations,
                "mixed": mixed,
                "wrong_rows": wrong,
            },
        )
        time.sleep(READER_PAUSE)


if __name__ == "__main__":
    role, target = sys.argv[1], Path(sys.argv[2])
    if role == "production":
        production(target, sys.argv[3:])
    else:
        reader(target, *sys.argv[3:6])
    os._exit(0)  # a threaded delta-rs or Spark client must not hold the exit (see backfill/state/ledger.py)
