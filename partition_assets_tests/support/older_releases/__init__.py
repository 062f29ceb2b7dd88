"""Backfill state that earlier releases of partition_assets wrote, saved as they left it, for
the tests that this release reads it (state_formats.py, docs/guide/upgrading.md).

Each folder is named by the commit whose code wrote it. In a worktree of that commit with
its own venv (`git worktree add /tmp/old <commit> && make -C /tmp/old install`), two staged
backfills of safe_defs over 2024-01-01..02 ran through `partition-assets backfill run`
(the commit's `Lakehouse.backfill`): the first published (its ledger rows, its release in
the release log), the second, with PARTITION_ASSETS_TEST_FACTOR=3, failed its gate (its
record, its parked leases, its staging and manifests, the gate's fingerprints and ledger
rows). `state.json` holds the instance's rows of the backfill table and each lake file's
modification time (a git checkout does not keep it; a gate's fingerprint covers it);
`lake/` holds the lake as it was.

- d216097: the last state before formats were versioned (no format field or property).
- ade35ca: before staging fingerprints existed: a gate that recorded none.
- 1d80543: a local Spark server's pid and identity files (`spark/`) and a deploy record
  (`deploys/`), before they were versioned: written by that commit's `record_server`, its
  `_launch`'s identity write and `save_deployment`, for a server and a deploy long gone.

Not guaranteed: the instance's runs and events are not saved (a copy of its database is
megabytes): `status` shows the nodes as missing, and commands that read the runs see none.
"""

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import dagster as dg

from partition_assets.backfill.state.store import BACKFILLS, BackfillStore
from partition_assets.dagster_instance.key_values import sql_run_storage

FOLDER = Path(__file__).parent


@dataclass(frozen=True)
class OlderState:
    """An earlier release's state, copied for one test: its lake, its backfills' ids."""

    commit: str
    lake: Path
    published: str  # the backfill it published
    gate_failed: str  # the backfill whose gate failed, its staging kept


def insert_record(instance: dg.DagsterInstance, backfill_id: str, status: str, body: dict, version: int = 1) -> None:
    """A record row as another release wrote it, past this release's code."""
    BackfillStore(instance)  # the tables, when the instance has none yet
    with sql_run_storage(instance).connect() as connection:
        connection.execute(
            BACKFILLS.insert().values(
                id=backfill_id, status=status, version=version, body=json.dumps(body), created_at=0, updated_at=0
            )
        )


def stored_body(instance: dg.DagsterInstance, backfill_id: str) -> dict:
    """The record body of `backfill_id` as stored, past this release's code."""
    with sql_run_storage(instance).connect() as connection:
        return json.loads(connection.execute(BACKFILLS.select().where(BACKFILLS.c.id == backfill_id)).one().body)


def older_state(commit: str, root: Path, instance: dg.DagsterInstance | None = None) -> OlderState:
    """The state `commit` wrote: its lake copied to `root / "lake"` with its files' times as they
    were, and its records inserted into `instance` (when given)."""
    saved = json.loads((FOLDER / commit / "state.json").read_text())
    lake = root / "lake"
    shutil.copytree(FOLDER / commit / "lake", lake)
    for path, mtime_ns in saved["mtimes"].items():
        os.utime(lake / path, ns=(mtime_ns, mtime_ns))
    records = {row["status"]: row["id"] for row in saved["records"]}
    if instance is not None:
        for row in saved["records"]:
            insert_record(instance, row["id"], row["status"], row["body"], row["version"])
    return OlderState(commit, lake, records["published"], records["gate_failed"])


def saved_records(commit: str) -> list[dict]:
    """The record rows `commit` wrote (id, status, version, body), oldest first."""
    return json.loads((FOLDER / commit / "state.json").read_text())["records"]
