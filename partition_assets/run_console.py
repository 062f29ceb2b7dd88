"""How much of a Dagster run's events its console logger prints: the engine's runs (node
runs, the publish and gate runs it records) keep Dagster's DEBUG event lines and a failed
step's stack trace in the run's event log, off the command's output, unless the command was
asked for them (`--verbose`).
"""

import os
from collections.abc import Mapping

import dagster as dg

# Set (to anything but empty) by `backfill run|resume|retry --verbose`: node runs print
# Dagster's DEBUG event lines as `dagster asset materialize` does. An environment variable,
# as it reaches every process that runs nodes (workers copy the command's environment).
VERBOSE_ENV = "PARTITION_ASSETS_VERBOSE"
# The level of Dagster's console logger in node runs but verbose ones: above ERROR, as a
# failed step logs its stack trace at ERROR (some 40 lines a node), which the command's own
# line per failed node replaces.
QUIET_CONSOLE_LEVEL = "CRITICAL"


def quiet_console_config(job: dg.JobDefinition, run_config: Mapping[str, object]) -> dict[str, object]:
    """`run_config`, its runs' console logger (Dagster's default one, which prints every event
    at DEBUG to stderr) set to QUIET_CONSOLE_LEVEL, unless VERBOSE_ENV is set. What the event log
    records is unchanged (it has its own handler, at the instance's level). A job with loggers
    of its own, or a run config that configures loggers, keeps them as they are.

    Not guaranteed: the terminal shows what the asset's code logs through `context.log`, its
    warnings and errors included, only with VERBOSE_ENV set (they are in the run's log, in the
    UI); Python's `warnings`, a logger of its own and what it prints still show."""
    default_console = job.loggers.get("console") is dg.colored_console_logger and len(job.loggers) == 1
    if os.environ.get(VERBOSE_ENV) or not default_console or "loggers" in run_config:
        return dict(run_config)
    return {**run_config, "loggers": {"console": {"config": {"log_level": QUIET_CONSOLE_LEVEL}}}}
