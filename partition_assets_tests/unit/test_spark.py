"""Spark settings from the environment, refused when malformed (Java discovery and the local
Spark Connect server: partition_assets_tests/integration/test_spark.py)."""

import pytest

from partition_assets.cli.main import main
from partition_assets.errors import SparkConfigError
from partition_assets.spark import SparkResource


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
