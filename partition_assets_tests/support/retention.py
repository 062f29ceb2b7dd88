"""Tables' files for vacuum tests: dating files (and a commit's removes) past a vacuum's
retention, and the files some Delta version still references (what a vacuum must keep).

Not guaranteed: that a filesystem keeps the times set (a copy may reset them).
"""

import json
import os
import time
from pathlib import Path

from deltalake import DeltaTable


def backdate(root: Path, hours: float) -> None:
    """Dates `root` and every file and folder under it `hours` back, the Delta log aside:
    old enough for a vacuum, whose retention is at least an hour, to delete what no
    reader sees. The log keeps its own times."""
    when = time.time() - hours * 3600
    for path in [root, *root.rglob("*")]:
        if "_delta_log" not in path.relative_to(root).parts:
            os.utime(path, (when, when))


def files_of_every_version(table_uri: str) -> set[str]:
    """The data files some version of the Delta table references: the live ones, and the
    replaced ones a vacuum keeps until their removal is older than the retention."""
    latest = DeltaTable(table_uri).version()
    return {path for version in range(latest + 1) for path in DeltaTable(table_uri, version=version).file_uris()}


def backdate_removes(table_uri: str, version: int, hours: float) -> None:
    """Dates the remove actions of the commit at `version` `hours` back: what a vacuum sees
    once that long has passed since the commit replaced those files (its retention counts
    from a remove's deletion timestamp, which the commit took from the clock)."""
    log = Path(table_uri) / "_delta_log" / f"{version:020d}.json"
    shift_ms = int(hours * 3600 * 1000)
    lines = []
    for line in log.read_text().splitlines():
        action = json.loads(line)
        if "remove" in action:
            action["remove"]["deletionTimestamp"] -= shift_ms
        lines.append(json.dumps(action))
    log.write_text("\n".join(lines) + "\n")
