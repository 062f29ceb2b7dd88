"""Spark settings from the environment, refused when malformed, and how long a call retries an
unreachable server (Java discovery and the local Spark Connect server:
partition_assets_tests/integration/test_spark.py)."""

import pytest

from partition_assets.cli.main import main
from partition_assets.errors import EnvironmentSetupError, SparkConfigError
from partition_assets.spark import SparkResource, retry_policy
from partition_assets.spark.retry_policy import UnreachableFor
from partition_assets.spark.unreachable import UNREACHABLE_ENV


def test_spark_settings_come_from_a_json_object_in_the_environment(monkeypatch):
    monkeypatch.setenv(
        "PARTITION_ASSETS_SPARK_CONF",
        '{"spark.executor.memory": "4g", "spark.cores.max": 8, "spark.dynamicAllocation.enabled": false}',
    )
    resource = SparkResource.from_env()
    assert resource.spark_config == {
        "spark.executor.memory": "4g",
        "spark.cores.max": "8",
        "spark.dynamicAllocation.enabled": "false",
    }
    # Static settings go to the server the resource would start; spark.sql.* ones apply per session.
    monkeypatch.setenv(
        "PARTITION_ASSETS_SPARK_CONF", '{"spark.driver.memory": "1g", "spark.sql.shuffle.partitions": 8}'
    )
    assert SparkResource.from_env().local_server().conf == {"spark.driver.memory": "1g"}


@pytest.mark.parametrize(
    "text",
    [
        "spark.executor.memory=4g",
        '["spark.executor.memory", "4g"]',
        '{"executor.memory": "4g"}',
        '{"spark.jars": null}',
    ],
)
def test_malformed_spark_settings_are_refused(monkeypatch, text):
    monkeypatch.setenv("PARTITION_ASSETS_SPARK_CONF", text)
    with pytest.raises(SparkConfigError):
        SparkResource.from_env()


def test_the_cli_refuses_malformed_spark_settings_in_one_line_and_starts_nothing(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("PARTITION_ASSETS_SPARK_CONF", "spark.executor.memory=4g")
    monkeypatch.setenv("PARTITION_ASSETS_STATE_DIR", str(tmp_path))
    assert main(["spark", "start"]) == 2
    message = capsys.readouterr().err
    assert message.count("\n") == 1 and "PARTITION_ASSETS_SPARK_CONF='spark.executor.memory=4g'" in message
    assert not list(tmp_path.iterdir())


def test_a_spark_call_retries_an_unreachable_server_within_the_configured_seconds_only(monkeypatch):
    monkeypatch.setenv(UNREACHABLE_ENV, "5")
    assert SparkResource.from_env().unreachable_seconds == 5.0
    clock = [100.0]
    monkeypatch.setattr(retry_policy.time, "monotonic", lambda: clock[0])
    retries = UnreachableFor(5).to_state()
    waited = []
    while (wait := retries.next_attempt()) is not None:
        waited.append(wait)
        clock[0] += wait / 1000
    # Spark's own backoff (50 ms, then 4 times longer each time), cut at the deadline: 5 s, not 10 minutes.
    assert waited[:3] == [50, 200, 800] and 4999 <= sum(waited) <= 5000, waited  # whole milliseconds


@pytest.mark.parametrize("text", ["0", "-1", "soon"])
def test_unreachable_seconds_that_are_no_positive_number_are_refused(monkeypatch, text):
    monkeypatch.setenv(UNREACHABLE_ENV, text)
    with pytest.raises(EnvironmentSetupError, match=f"{UNREACHABLE_ENV}='{text}' is not a positive number"):
        SparkResource.from_env()
