"""Which sensors and schedules start running when a code location loads: `PARTITION_ASSETS_SENSORS`."""

import os

import dagster as dg

ENV = "PARTITION_ASSETS_SENSORS"


def _named_running(name: str) -> bool:
    """True if `PARTITION_ASSETS_SENSORS` is `all` or lists `name` (comma-separated)."""
    names = {n.strip() for n in os.environ.get(ENV, "").split(",") if n.strip()}
    return "all" in names or name in names


def default_status(sensor_name: str) -> dg.DefaultSensorStatus:
    """RUNNING if `PARTITION_ASSETS_SENSORS` is `all` or lists `sensor_name` (comma-separated),
    STOPPED otherwise. The UI's toggle overrides it either way."""
    return dg.DefaultSensorStatus.RUNNING if _named_running(sensor_name) else dg.DefaultSensorStatus.STOPPED


def default_schedule_status(schedule_name: str) -> dg.DefaultScheduleStatus:
    """The same rule for a schedule: RUNNING if `PARTITION_ASSETS_SENSORS` names it (or is `all`)."""
    return dg.DefaultScheduleStatus.RUNNING if _named_running(schedule_name) else dg.DefaultScheduleStatus.STOPPED
