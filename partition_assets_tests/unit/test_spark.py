"""Spark settings from the environment, refused when malformed, how long a call retries an
unreachable server, the FAIR pools and backfill slicing sized from the server's cores, and the
listener that preempts backfill tasks joining the server's conf (Java
discovery and the local Spark Connect server:
partition_assets_tests/integration/test_connect_server.py)."""

import os
from xml.etree import ElementTree

import pytest

from partition_assets.cli.main import main
from partition_assets.errors import EnvironmentSetupError, SparkConfigError
from partition_assets.spark import SparkResource, retry_policy
from partition_assets.spark.jvm_jar import JVM_DIR
from partition_assets.spark.resource import PREEMPT_ENV, TASKS_PER_CORE_ENV
from partition_assets.spark.retry_policy import UnreachableFor
from partition_assets.spark.scheduler_pools import (
    BACKFILL_POOL,
    DEFAULT_MAX_KILLS_PER_TASK,
    DEFAULT_TASKS_PER_CORE,
    LEAF_PARALLELISM_CONF,
    LISTENERS_KEY,
    MAX_KILLS_PER_TASK_CONF,
    POOL_CONF,
    PREEMPTING_LISTENER,
    PRODUCTION_POOL,
    PRODUCTION_WEIGHT,
    backfill_slicing_conf,
    cores_of,
    fair_scheduler_conf,
    preemption_conf,
)
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


def test_a_backfill_sessions_tasks_per_core_come_from_the_environment(monkeypatch):
    assert SparkResource.from_env().backfill_tasks_per_core == DEFAULT_TASKS_PER_CORE
    monkeypatch.setenv(TASKS_PER_CORE_ENV, "0")
    assert SparkResource.from_env().backfill_tasks_per_core == 0


@pytest.mark.parametrize("text", ["-1", "2.5", "many"])
def test_tasks_per_core_that_are_no_whole_number_are_refused(monkeypatch, text):
    monkeypatch.setenv(TASKS_PER_CORE_ENV, text)
    with pytest.raises(EnvironmentSetupError, match=f"{TASKS_PER_CORE_ENV}='{text}' is not a whole number >= 0"):
        SparkResource.from_env()


@pytest.mark.parametrize(
    ("master", "cores"),
    [("local", 1), ("local[2]", 2), ("local[3,2]", 3), ("local[*]", os.cpu_count()), ("spark://host:7077", None)],
)
def test_the_cores_of_a_master_are_known_in_local_mode_only(master, cores):
    assert cores_of(master) == cores


def test_productions_pool_takes_every_core_and_a_backfill_is_sliced_by_the_servers_cores(tmp_path):
    conf = fair_scheduler_conf(tmp_path / "pools.xml", "local[4]")
    pools = {
        pool.get("name"): (pool.findtext("weight"), pool.findtext("minShare"))
        for pool in ElementTree.parse(conf["spark.scheduler.allocation.file"]).getroot()
    }
    assert conf["spark.scheduler.mode"] == "FAIR"
    assert pools == {PRODUCTION_POOL: (str(PRODUCTION_WEIGHT), "4"), BACKFILL_POOL: ("1", "0")}
    assert backfill_slicing_conf(4, 8) == {LEAF_PARALLELISM_CONF: "32"}
    # An unknown server, or slicing turned off: Spark's own task counts.
    assert backfill_slicing_conf(None, 8) == backfill_slicing_conf(4, 0) == {}


def test_the_preempting_listener_leads_a_confs_own_listeners_and_names_the_pools_python_sets():
    default_bound = {MAX_KILLS_PER_TASK_CONF: str(DEFAULT_MAX_KILLS_PER_TASK)}
    assert preemption_conf({}) == {LISTENERS_KEY: PREEMPTING_LISTENER, **default_bound}
    assert preemption_conf({LISTENERS_KEY: "com.acme.Audit"}) == {
        LISTENERS_KEY: f"{PREEMPTING_LISTENER},com.acme.Audit",
        **default_bound,
    }
    source = (JVM_DIR / f"{PREEMPTING_LISTENER.rsplit('.', 1)[1]}.java").read_text()
    for constant in (POOL_CONF, PRODUCTION_POOL, BACKFILL_POOL, MAX_KILLS_PER_TASK_CONF):
        assert f'= "{constant}";' in source
    assert f"DEFAULT_MAX_KILLS_PER_TASK = {DEFAULT_MAX_KILLS_PER_TASK};" in source


def test_a_servers_bound_on_one_backfill_tasks_kills_is_its_confs_or_refused():
    assert preemption_conf({MAX_KILLS_PER_TASK_CONF: "1"})[MAX_KILLS_PER_TASK_CONF] == "1"
    assert preemption_conf({MAX_KILLS_PER_TASK_CONF: "0"})[MAX_KILLS_PER_TASK_CONF] == "0"  # never killed
    for bad in ("-1", "two", "1.5", "true", ""):
        with pytest.raises(SparkConfigError, match=f"{MAX_KILLS_PER_TASK_CONF}='{bad}' is not a whole number >= 0"):
            preemption_conf({MAX_KILLS_PER_TASK_CONF: bad})


def test_preemption_is_on_unless_the_environment_turns_it_off(monkeypatch):
    assert SparkResource.from_env().local_server().preempt_backfill_tasks
    monkeypatch.setenv(PREEMPT_ENV, "0")
    assert not SparkResource.from_env().local_server().preempt_backfill_tasks
    monkeypatch.setenv(PREEMPT_ENV, "1")
    assert SparkResource.from_env().local_server().preempt_backfill_tasks


@pytest.mark.parametrize("text", ["no", "false", "2", ""])
def test_a_preemption_setting_that_is_neither_on_nor_off_is_refused(monkeypatch, text):
    monkeypatch.setenv(PREEMPT_ENV, text)
    with pytest.raises(EnvironmentSetupError, match=f"{PREEMPT_ENV}='{text}' is neither 1 \\(on\\) nor 0 \\(off\\)"):
        SparkResource.from_env()
