"""What a backfill's record keeps of the content it replaces (backfill/publishing/provenance.py):
grouped per asset by commit, code version and runtime, read back as it was taken, and nothing
known for a record of an earlier release."""

import json
from typing import cast

import dagster as dg

from partition_assets.backfill.model import BackfillStatus, Node
from partition_assets.backfill.planning.spec import BackfillSpec
from partition_assets.backfill.publishing.originals import Original
from partition_assets.backfill.publishing.provenance import provenance_from_json, provenance_to_json
from partition_assets.backfill.state.record import BackfillRecord
from partition_assets.backfill.state.store import BackfillStore

DAYS = [f"2024-{month:02d}-{day:02d}" for month in range(1, 13) for day in range(1, 29)]  # 336 partitions
RUNTIME = {"python": "3.12.1", "pyspark": "4.0.0"}


def _found() -> dict[Node, Original]:
    """Two assets of 336 partitions: `orders` made by commit aaa, then its second half by bbb
    (another code version); `revenue` all by aaa; one unpartitioned asset without a commit."""
    found = {}
    for index, day in enumerate(DAYS):
        sha, version = ("aaa", "v1") if index < len(DAYS) // 2 else ("bbb", "v2")
        found[Node(dg.AssetKey("orders"), day)] = Original({"events": index}, RUNTIME, sha, version)
        found[Node(dg.AssetKey(["sales", "revenue"]), day)] = Original({}, dict(reversed(RUNTIME.items())), "aaa", "r1")
    found[Node(dg.AssetKey("totals"), "")] = Original(code_version="t1")
    return found


def test_partitions_made_by_one_commit_code_version_and_runtime_are_one_group_per_asset():
    saved = provenance_to_json(_found())

    assert {asset: len(groups) for asset, groups in saved.items()} == {"orders": 2, "sales/revenue": 1, "totals": 1}
    assert saved["orders"][0] == {"git_sha": "aaa", "code_version": "v1", "runtime": RUNTIME, "partitions": DAYS[:168]}
    assert saved["orders"][1]["git_sha"] == "bbb" and saved["orders"][1]["partitions"] == DAYS[168:]
    assert saved["totals"] == [{"git_sha": None, "code_version": "t1", "runtime": {}, "partitions": [""]}]
    # Compact: a partition key once per asset, and no commit or runtime per partition.
    text = json.dumps(saved)
    assert text.count('"2024-01-01"') == 2 and text.count('"aaa"') == 2 and text.count('"pyspark"') == 3


def test_the_provenance_reads_back_as_it_was_taken_but_the_input_versions():
    found = _found()

    restored = provenance_from_json(json.loads(json.dumps(provenance_to_json(found))))

    assert restored == {
        node: Original(runtime=original.runtime, git_sha=original.git_sha, code_version=original.code_version)
        for node, original in found.items()
    }


def test_a_record_keeps_the_provenance_and_one_of_an_earlier_release_knows_none():
    store = cast(BackfillStore, None)  # from_json only binds it
    record = BackfillRecord(BackfillSpec(module="m", selection="orders"), store=store)
    record.restored_provenance = provenance_to_json(_found())
    saved = json.loads(json.dumps(record.to_json()))

    loaded = BackfillRecord.from_json(saved, BackfillStatus.RUNNING, record.id, store)
    del saved["restored_provenance"]
    earlier = BackfillRecord.from_json(saved, BackfillStatus.RUNNING, record.id, store)

    assert provenance_from_json(loaded.restored_provenance) == provenance_from_json(record.restored_provenance)
    assert earlier.restored_provenance is None and provenance_from_json(earlier.restored_provenance) == {}
