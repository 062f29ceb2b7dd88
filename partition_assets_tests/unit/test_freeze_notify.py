"""Freezing assets in a real Dagster instance (seen by every process of the deployment:
partition_assets_tests/integration/test_freeze.py freezes from several at once), the catch-up sensor
honouring it, and the backfill notification hook on a real Definitions object. (The eager
sensor's freeze test is in test_eager.py.)"""

import logging

import dagster as dg
import pytest

from partition_assets.backfill.planning.run_config import COORDINATOR_OP
from partition_assets.backfill.publishing.freeze import freeze, frozen_assets, is_frozen, unfreeze
from partition_assets.backfill.publishing.notify import BackfillEvent, notification_hook, notify
from partition_assets.errors import NotificationHookError
from partition_assets_tests.support.locations import automation_defs

ORDERS, REVENUE, CUSTOMERS = dg.AssetKey("orders"), dg.AssetKey(["finance", "revenue"]), dg.AssetKey("customers")


def test_the_kv_store_freeze_relies_on(instance):
    """Pins the Dagster API the freeze is stored with: set, overwrite, get by keys."""
    storage = instance.run_storage
    storage.set_cursor_values({"partition_assets/probe": "1"})
    storage.set_cursor_values({"partition_assets/probe": "2"})
    assert storage.get_cursor_values({"partition_assets/probe", "partition_assets/absent"}) == {
        "partition_assets/probe": "2"
    }


def test_unfreezing_one_backfill_keeps_the_others_frozen(instance):
    assert frozen_assets(instance) == {}
    freeze(instance, [ORDERS, REVENUE], "bf1")
    freeze(instance, [CUSTOMERS], "bf2")
    assert frozen_assets(instance) == {ORDERS: "bf1", REVENUE: "bf1", CUSTOMERS: "bf2"}
    assert is_frozen(instance, REVENUE) == "bf1"
    unfreeze(instance, "bf1")
    assert frozen_assets(instance) == {CUSTOMERS: "bf2"}
    assert is_frozen(instance, ORDERS) is None
    unfreeze(instance, "bf1")  # twice is harmless
    unfreeze(instance, "bf2")
    assert frozen_assets(instance) == {}


def test_an_asset_frozen_by_two_backfills_stays_frozen_until_both_unfreeze(instance):
    freeze(instance, [ORDERS], "bf1")
    freeze(instance, [ORDERS], "bf2")
    unfreeze(instance, "bf1")
    assert is_frozen(instance, ORDERS) == "bf2"


def test_another_instance_on_the_same_home_sees_the_freeze(tmp_path):
    with dg.instance_for_test(temp_dir=str(tmp_path)) as writer, dg.instance_for_test(temp_dir=str(tmp_path)) as reader:
        freeze(writer, [ORDERS], "bf1")
        assert frozen_assets(reader) == {ORDERS: "bf1"}
        unfreeze(reader, "bf1")
        assert frozen_assets(writer) == {}


def test_the_catch_up_sensor_leaves_frozen_assets_out(instance):
    for day in ("01", "02", "04"):
        instance.report_runless_asset_event(dg.AssetMaterialization("gap_raw", partition=f"2024-01-{day}"))
    sensor = automation_defs.defs.resolve_sensor_def("catch_up")

    def evaluate():
        return sensor(dg.build_sensor_context(instance=instance, definitions=automation_defs.defs))

    freeze(instance, [dg.AssetKey("gap_clean")], "bf1")
    request = evaluate()
    config = request.run_config["ops"][COORDINATOR_OP]["config"]
    assert config["selection"] == '(group:gaps) and not (key:"gap_clean")'
    assert (config["start"][:10], config["end"][:10]) == ("2024-01-03", "2024-01-09")  # gap_raw's gaps only
    freeze(instance, [dg.AssetKey("gap_raw")], "bf2")
    skipped = evaluate()
    assert isinstance(skipped, dg.SkipReason)
    assert (
        skipped.skip_message == "no gaps in group:gaps (left out, frozen by a backfill: gap_clean (bf1), gap_raw (bf2))"
    )
    unfreeze(instance, "bf1")
    unfreeze(instance, "bf2")
    thawed = evaluate().run_config["ops"][COORDINATOR_OP]["config"]
    assert thawed["selection"] == "group:gaps" and thawed["start"][:10] == "2024-01-01"  # gap_clean has no day


@dg.asset
def orders() -> int:
    return 1


def test_no_hook_configured_notifies_nobody():
    definitions = dg.Definitions(assets=[orders])
    assert notification_hook(definitions) is None
    assert notify(definitions, BackfillEvent("started", "bf1", (ORDERS,))) is False


def test_the_hook_on_the_definitions_hears_each_event():
    heard: list[BackfillEvent] = []
    definitions = dg.Definitions(assets=[orders], resources={"backfill_notifications": heard.append})
    dg.Definitions.validate_loadable(definitions)
    assert dg.materialize([orders], resources={"backfill_notifications": heard.append}).success  # runs ignore it
    event = BackfillEvent("gate_failed", "bf1", (ORDERS, REVENUE), "orders[2024-01-03]: rows -40% > 10%")
    assert notify(definitions, event) is True
    assert notify(dg.Definitions.merge(definitions, dg.Definitions()), BackfillEvent("canceled", "bf1", ())) is True
    assert [e.kind for e in heard] == ["gate_failed", "canceled"]
    assert heard[0].text() == "backfill bf1 gate failed (orders, finance/revenue): orders[2024-01-03]: rows -40% > 10%"


def test_a_broken_hook_is_logged_and_never_fails_the_backfill(caplog):
    def broken_webhook(event: BackfillEvent) -> None:
        raise ConnectionError("slack is down")

    definitions = dg.Definitions(assets=[orders], resources={"backfill_notifications": broken_webhook})
    with caplog.at_level(logging.ERROR, logger="partition_assets.backfill.publishing.notify"):
        assert notify(definitions, BackfillEvent("published", "bf1", (ORDERS,))) is False
    assert "slack is down" in caplog.text and "backfill bf1 published" in caplog.text


def test_a_hook_wrapped_in_a_resource_definition_is_refused_with_the_fix():
    wrapped = dg.ResourceDefinition.hardcoded_resource(print)
    definitions = dg.Definitions(assets=[orders], resources={"backfill_notifications": wrapped})
    with pytest.raises(NotificationHookError, match="give the function itself"):
        notification_hook(definitions)
