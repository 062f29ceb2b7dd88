"""The unit tier's guard (partition_assets_tests/unit/conftest.py) refuses what would make a unit test slow or
order-dependent: a process of any kind, or a Spark session."""

import multiprocessing
import subprocess
from concurrent.futures import ProcessPoolExecutor

import pytest
from pyspark.sql import SparkSession

from partition_assets_tests.unit.conftest import StartRefused


def test_a_process_or_a_spark_session_is_refused_where_it_is_started(no_process_and_no_spark):
    starts = [
        lambda: subprocess.run(["true"], check=True),
        lambda: multiprocessing.get_context("spawn").Process(target=print).start(),
        lambda: ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("forkserver")).submit(print).result(),
        lambda: SparkSession.builder.remote("sc://127.0.0.1:1").getOrCreate(),
    ]
    for start in starts:
        with pytest.raises(StartRefused):
            start()
    assert len(no_process_and_no_spark) == len(starts)
    no_process_and_no_spark.clear()  # each refused as it should be: this test passes
