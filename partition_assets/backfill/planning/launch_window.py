"""A backfill's launch window (`--window 20:00-06:00 Europe/Paris`): the hours of the day,
in a time zone, in which it launches node runs.

A pure value: `LaunchWindow.parse` reads the text (refusing a malformed one), `is_open`
and `next_open` answer for an instant the caller passes (the coordinator's clock, a test's
fixed time). A window whose end is before its start carries over midnight (20:00-06:00 is
open from 20:00 to 06:00 the next day); the end is excluded. The zone defaults to UTC;
days follow the zone's calendar, daylight-saving changes included.

Not guaranteed: a window only holds back launches. Runs started inside it run to their
end, past the window's close.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from partition_assets.errors import LaunchWindowError

_FORM = re.compile(r"^\s*(\d{1,2}):(\d{2})\s*-\s*(\d{1,2}):(\d{2})\s*(\S+)?\s*$")
_EXAMPLE = "e.g. '20:00-06:00 Europe/Paris' (the zone defaults to UTC)"


@dataclass(frozen=True)
class LaunchWindow:
    """Open from `opens` until `closes` (local times of `zone`), every day."""

    opens: time
    closes: time
    zone: str = "UTC"

    @classmethod
    def parse(cls, text: str) -> LaunchWindow:
        """The window `HH:MM-HH:MM [ZONE]` names.

        Raises:
            LaunchWindowError: The text is not of that form, a time is not a time of day,
                both times are equal, or the zone is unknown; nothing was recorded.
        """
        found = _FORM.match(text or "")
        if found is None:
            raise LaunchWindowError(f"--window {text!r} is not HH:MM-HH:MM [ZONE]: write it {_EXAMPLE}")
        hour1, minute1, hour2, minute2 = (int(part) for part in found.groups()[:4])
        if max(hour1, hour2) > 23 or max(minute1, minute2) > 59:
            raise LaunchWindowError(f"--window {text!r} holds a time that is no time of day (00:00 to 23:59)")
        opens, closes = time(hour1, minute1), time(hour2, minute2)
        if opens == closes:
            raise LaunchWindowError(
                f"--window {text!r} opens when it closes: give two different times, {_EXAMPLE}; "
                "for no window, leave --window out"
            )
        zone = found.group(5) or "UTC"
        try:
            ZoneInfo(zone)
        except (ZoneInfoNotFoundError, ValueError):
            raise LaunchWindowError(
                f"--window {text!r} names the time zone {zone!r}, which is unknown: give an IANA name such as "
                "Europe/Paris or America/New_York, or UTC"
            ) from None
        return cls(opens, closes, zone)

    def __str__(self) -> str:
        return f"{self.opens:%H:%M}-{self.closes:%H:%M} {self.zone}"

    def is_open(self, at: datetime) -> bool:
        """Whether node runs may launch at the aware instant `at`."""
        local = at.astimezone(ZoneInfo(self.zone)).time().replace(tzinfo=None)
        if self.opens < self.closes:
            return self.opens <= local < self.closes
        return local >= self.opens or local < self.closes  # carries over midnight

    def next_open(self, at: datetime) -> datetime:
        """The first instant from the aware `at` on when the window is open (`at` itself when open), in UTC."""
        if self.is_open(at):
            return at.astimezone(UTC)
        zone = ZoneInfo(self.zone)
        day = at.astimezone(zone).date()
        for offset in (0, 1, 2):  # today's opening, else tomorrow's (a DST gap may skip one)
            opening = datetime.combine(day + timedelta(days=offset), self.opens, zone)
            if opening > at and self.is_open(opening):
                return opening.astimezone(UTC)
        raise AssertionError(f"window {self} never opens after {at}")  # unreachable: opens != closes
