"""Which sensors start running when a code location loads: `PARTITION_ASSETS_SENSORS`."""

import os

import dagster as dg

ENV = "PARTITION_ASSETS_SENSORS"


def default_status(sensor_name: str) -> dg.DefaultSensorStatus:
    """RUNNING if `PARTITION_ASSETS_SENSORS` is `all` or lists `sensor_name` (comma-separated),
    STOPPED otherwise. The UI's toggle overrides it either way."""
    names = {n.strip() for n in os.environ.get(ENV, "").split(",") if n.strip()}
    running = "all" in names or sensor_name in names
    return dg.DefaultSensorStatus.RUNNING if running else dg.DefaultSensorStatus.STOPPED
