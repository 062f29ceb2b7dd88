"""Freezing assets from several processes at once, on one Dagster instance: every freeze
stays (partition_assets_tests/unit/test_freeze_notify.py freezes from this process)."""

import os
import time

import dagster as dg

from partition_assets.backfill.publishing.freeze import freeze, frozen_assets
from partition_assets_tests.support.racing import racing_pool


def _freeze_in_another_process(home: str, backfill_id: str, start_at: float) -> None:
    os.environ["DAGSTER_HOME"] = home
    with dg.DagsterInstance.get() as instance:
        time.sleep(max(0.0, start_at - time.time()))
        freeze(instance, [dg.AssetKey(backfill_id)], backfill_id)


def test_backfills_freezing_at_once_from_processes_all_stay_frozen(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    ids = [f"bf{i}" for i in range(4)]
    with dg.instance_for_test(temp_dir=str(home)) as instance:  # creates the storage once
        with racing_pool(len(ids), __name__) as pool:
            list(pool.map(time.sleep, [0.0] * len(ids)))  # workers up before the start signal
            start_at = time.time() + 1.0
            list(pool.map(_freeze_in_another_process, [str(home)] * len(ids), ids, [start_at] * len(ids)))
        assert frozen_assets(instance) == {dg.AssetKey(i): i for i in ids}
