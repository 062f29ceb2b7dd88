"""Validated constructors over Dagster's partitions definitions.

Each constructor fails when the definition is built, with a message that names
the bad value and the fix, instead of failing later inside a run.
"""

from __future__ import annotations

import difflib
import re
import zoneinfo
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import TypeVar

import dagster as dg

from partition_assets.errors import PartitionDefinitionError

# Substrings that break Dagster's key syntax: "|" joins multi-partition keys,
# "..." and "," delimit ranges and lists on the command line.
RESERVED_KEY_SUBSTRINGS = ("|", ",", "...", "[", "]", "*")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_YEAR_DIRECTIVES = ("%Y", "%y", "%G")
# Enough windows to cover a year of every grain coarser than minutes, so that a
# format dropping any field (even the year) produces a duplicate key.
_ROUND_TRIP_SPAN = timedelta(days=400)
_ROUND_TRIP_MAX_WINDOWS = 10_000

DateLike = str | datetime
_TimeDef = TypeVar("_TimeDef", bound=dg.TimeWindowPartitionsDefinition)


def hourly(
    start: DateLike,
    *,
    end: DateLike | None = None,
    tz: str = "UTC",
    fmt: str = "%Y-%m-%d-%H:%M",
    data_lag: int = 0,
    minute_offset: int = 0,
) -> dg.HourlyPartitionsDefinition:
    """Hourly partitions; keys are window starts in `tz`, formatted with `fmt`.

    Args:
        start: The first partition's start: a datetime, or text in `fmt`, e.g. '2024-01-01-00:00'.
        end: No partition ends after it: a datetime, or text in `fmt`; None for no last partition.
        fmt: The strftime format of the keys, and of `start` and `end` given as text.
        data_lag: How many hours the newest partition lags behind the last complete one.
        minute_offset: The minute of the hour at which each window starts.

    Raises:
        PartitionDefinitionError: An unknown `tz`; a `fmt` without a year, under which two partitions
            share a key, or whose keys hold a reserved substring; a `start` or `end` that does not
            match `fmt`; an `end` not after `start`; a `data_lag` that is not a whole number >= 0.
    """
    return _calendar(dg.HourlyPartitionsDefinition, start, end, tz, fmt, data_lag, minute_offset=minute_offset)


def daily(
    start: DateLike,
    *,
    end: DateLike | None = None,
    tz: str = "UTC",
    fmt: str = "%Y-%m-%d",
    data_lag: int = 0,
    hour_offset: int = 0,
) -> dg.DailyPartitionsDefinition:
    """Daily partitions; `data_lag=N` makes the newest partition N days older than yesterday.

    Args:
        start: The first partition's start: a datetime, or text in `fmt`, e.g. '2024-01-01'.
        end: No partition ends after it: a datetime, or text in `fmt`; None for no last partition.
        fmt: The strftime format of the keys, and of `start` and `end` given as text.
        hour_offset: The hour of the day at which each window starts.

    Raises:
        PartitionDefinitionError: An unknown `tz`; a `fmt` without a year, under which two partitions
            share a key, or whose keys hold a reserved substring; a `start` or `end` that does not
            match `fmt`; an `end` not after `start`; a `data_lag` that is not a whole number >= 0.
    """
    return _calendar(dg.DailyPartitionsDefinition, start, end, tz, fmt, data_lag, hour_offset=hour_offset)


def weekly(
    start: DateLike,
    *,
    end: DateLike | None = None,
    tz: str = "UTC",
    fmt: str = "%Y-%m-%d",
    data_lag: int = 0,
    day_offset: int = 0,
) -> dg.WeeklyPartitionsDefinition:
    """Weekly partitions starting on `day_offset` (0 = Sunday, Dagster's convention).

    Args:
        start: The first partition's start: a datetime, or text in `fmt`.
        end: No partition ends after it: a datetime, or text in `fmt`; None for no last partition.
        fmt: The strftime format of the keys, and of `start` and `end` given as text.
        data_lag: How many weeks the newest partition lags behind the last complete one.

    Raises:
        PartitionDefinitionError: An unknown `tz`; a `fmt` without a year, under which two partitions
            share a key, or whose keys hold a reserved substring; a `start` or `end` that does not
            match `fmt`; an `end` not after `start`; a `data_lag` that is not a whole number >= 0.
    """
    return _calendar(dg.WeeklyPartitionsDefinition, start, end, tz, fmt, data_lag, day_offset=day_offset)


def monthly(
    start: DateLike,
    *,
    end: DateLike | None = None,
    tz: str = "UTC",
    fmt: str = "%Y-%m-%d",
    data_lag: int = 0,
    day_offset: int = 1,
) -> dg.MonthlyPartitionsDefinition:
    """Monthly partitions starting on day `day_offset` of each month.

    Args:
        start: The first partition's start: a datetime, or text in `fmt`.
        end: No partition ends after it: a datetime, or text in `fmt`; None for no last partition.
        fmt: The strftime format of the keys, and of `start` and `end` given as text.
        data_lag: How many months the newest partition lags behind the last complete one.

    Raises:
        PartitionDefinitionError: An unknown `tz`; a `fmt` without a year, under which two partitions
            share a key, or whose keys hold a reserved substring; a `start` or `end` that does not
            match `fmt`; an `end` not after `start`; a `data_lag` that is not a whole number >= 0.
    """
    return _calendar(dg.MonthlyPartitionsDefinition, start, end, tz, fmt, data_lag, day_offset=day_offset)


def cron(
    schedule: str,
    start: DateLike,
    *,
    end: DateLike | None = None,
    tz: str = "UTC",
    fmt: str = "%Y-%m-%d-%H:%M",
    data_lag: int = 0,
) -> dg.TimeWindowPartitionsDefinition:
    """Partitions whose windows run between consecutive ticks of a cron `schedule`.

    Args:
        start: The first partition's start: a datetime, or text in `fmt`.
        end: No partition ends after it: a datetime, or text in `fmt`; None for no last partition.
        fmt: The strftime format of the keys, and of `start` and `end` given as text.
        data_lag: How many windows the newest partition lags behind the last complete one.

    Raises:
        PartitionDefinitionError: A `schedule` that is no valid cron string; an unknown `tz`; a `fmt`
            without a year, under which two partitions share a key, or whose keys hold a reserved
            substring; a `start` or `end` that does not match `fmt`; an `end` not after `start`; a
            `data_lag` that is not a whole number >= 0.
    """
    _check_common(start, end, tz, fmt, data_lag)
    try:
        definition = dg.TimeWindowPartitionsDefinition(
            cron_schedule=schedule,
            start=start,
            end=end,
            timezone=tz,
            fmt=fmt,
            end_offset=-data_lag,
        )
    except (dg.DagsterInvalidDefinitionError, dg.DagsterInvariantViolationError, ValueError):
        raise PartitionDefinitionError(
            f"cron schedule {schedule!r} is not valid: use five fields, "
            "minute hour day-of-month month day-of-week, e.g. '0 6 * * *'"
        ) from None
    return _round_trip_checked(definition, fmt)


def static(keys: Sequence[str]) -> dg.StaticPartitionsDefinition:
    """A fixed set of partition keys, e.g. regions.

    Raises:
        PartitionDefinitionError: `keys` is a string or empty; a key is not a non-empty string, has
            leading or trailing whitespace or a control character, holds one of
            RESERVED_KEY_SUBSTRINGS, or appears more than once.
    """
    if isinstance(keys, str) or not keys:
        raise PartitionDefinitionError(f"static partition keys must be a non-empty list of strings, got {keys!r}")
    for key in keys:
        _check_key(key)
    duplicates = sorted(key for key, count in Counter(keys).items() if count > 1)
    if duplicates:
        raise PartitionDefinitionError(f"static partition keys {duplicates} appear more than once: list each key once")
    return dg.StaticPartitionsDefinition(list(keys))


def dynamic(name: str) -> dg.DynamicPartitionsDefinition:
    """Partitions whose keys are added at run time (instance.add_dynamic_partitions).

    Args:
        name: The name `instance.add_dynamic_partitions` adds keys under.

    Raises:
        PartitionDefinitionError: `name` is not an identifier (letters, digits and '_', not starting
            with a digit).
    """
    if not isinstance(name, str) or not _IDENTIFIER.match(name):
        raise PartitionDefinitionError(
            f"dynamic partitions name {name!r} is not valid: use letters, digits and '_', starting with a letter"
        )
    return dg.DynamicPartitionsDefinition(name=name)


def multi(**dimensions: dg.PartitionsDefinition) -> dg.MultiPartitionsDefinition:
    """Two dimensions, e.g. `multi(ds=daily(...), region=static([...]))`.

    Dimension names become the storage's partition column names.

    Raises:
        PartitionDefinitionError: Not exactly two dimensions; more than one time dimension; a
            dimension name that is not a valid column name.
    """
    if len(dimensions) != 2:
        raise PartitionDefinitionError(
            f"multi partitions take exactly two dimensions, got {sorted(dimensions)}: "
            "name one time dimension and one static or dynamic one"
        )
    time_dims = [
        name for name, definition in dimensions.items() if isinstance(definition, dg.TimeWindowPartitionsDefinition)
    ]
    if len(time_dims) > 1:
        raise PartitionDefinitionError(
            f"multi partitions allow one time dimension, got {time_dims}: make the other dimension static or dynamic"
        )
    for name in dimensions:
        if not _IDENTIFIER.match(name):
            raise PartitionDefinitionError(
                f"dimension name {name!r} is not a valid column name: "
                "use letters, digits and '_', starting with a letter"
            )
    return dg.MultiPartitionsDefinition(dict(dimensions))


def _calendar(
    definition_class: Callable[..., _TimeDef],
    start: DateLike,
    end: DateLike | None,
    tz: str,
    fmt: str,
    data_lag: int,
    **offsets: int,
) -> _TimeDef:
    _check_common(start, end, tz, fmt, data_lag)
    definition = definition_class(start_date=start, end_date=end, timezone=tz, fmt=fmt, end_offset=-data_lag, **offsets)
    return _round_trip_checked(definition, fmt)


def _check_common(start: DateLike, end: DateLike | None, tz: str, fmt: str, data_lag: int) -> None:
    check_timezone(tz)
    if not any(directive in fmt for directive in _YEAR_DIRECTIVES):
        raise PartitionDefinitionError(
            f"fmt {fmt!r} has no year: keys of different years would collide; include %Y, e.g. '%Y-%m-%d'"
        )
    start_at = _parse_bound("start", start, fmt)
    if end is not None:
        end_at = _parse_bound("end", end, fmt)
        if end_at <= start_at:
            raise PartitionDefinitionError(f"start {start!r} is not before end {end!r}: swap them or move end later")
    if not isinstance(data_lag, int) or data_lag < 0:
        raise PartitionDefinitionError(
            f"data_lag {data_lag!r} must be a whole number of periods >= 0 "
            "(how many periods the newest partition lags behind the current one)"
        )


def check_timezone(tz: str) -> None:
    """Checks that `tz` names a timezone.

    Raises:
        PartitionDefinitionError: `tz` is no IANA timezone name; the message suggests close ones.
    """
    try:
        zoneinfo.ZoneInfo(tz)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, TypeError):
        close = difflib.get_close_matches(str(tz), zoneinfo.available_timezones(), n=3)
        hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        raise PartitionDefinitionError(
            f"unknown timezone {tz!r}: use an IANA name such as 'UTC' or 'Europe/Berlin'.{hint}"
        ) from None


def _parse_bound(name: str, value: DateLike, fmt: str) -> datetime:
    if isinstance(value, datetime):
        return value.replace(tzinfo=None)
    try:
        return datetime.strptime(value, fmt)
    except (ValueError, TypeError):
        example = datetime(2024, 1, 31, 13, 0).strftime(fmt)
        raise PartitionDefinitionError(
            f"{name} {value!r} does not match fmt {fmt!r}: write it like {example!r}"
        ) from None


def _check_key(key: object) -> None:
    if not isinstance(key, str) or not key:
        raise PartitionDefinitionError(f"partition key {key!r} must be a non-empty string")
    if key != key.strip() or any(ord(char) < 32 for char in key):
        raise PartitionDefinitionError(
            f"partition key {key!r} has leading/trailing whitespace or control characters: remove them"
        )
    for reserved in RESERVED_KEY_SUBSTRINGS:
        if reserved in key:
            raise PartitionDefinitionError(
                f"partition key {key!r} contains {reserved!r}, which Dagster reserves for "
                "multi-partition keys and key ranges: use letters, digits, '-' or '_' instead"
            )


def _round_trip_checked(definition: _TimeDef, fmt: str) -> _TimeDef:
    """Refuses formats under which two partitions share a key, or a key that breaks key syntax."""
    first = definition.get_first_partition_window()
    if first is None:
        return definition
    period = first.end - first.start
    sample_until = first.start + min(_ROUND_TRIP_SPAN, period * _ROUND_TRIP_MAX_WINDOWS)
    keys = definition.get_partition_keys(current_time=sample_until)
    seen: dict[str, int] = {}
    for index, key in enumerate(keys):
        if key in seen:
            raise PartitionDefinitionError(
                f"fmt {fmt!r} does not round-trip: partitions {seen[key]} and {index} both "
                f"format as {key!r}; include every field down to the partition's grain "
                "(e.g. '%Y-%m-%d' for daily, '%Y-%m-%d-%H:%M' for hourly)"
            )
        seen[key] = index
    for key in keys[:1]:
        _check_key(key)
    return definition
