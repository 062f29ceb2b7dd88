"""Settings read from the environment, refused when malformed."""

import os

from partition_assets.errors import EnvironmentSetupError


def positive_seconds(name: str, default: float) -> float:
    """The positive number of seconds the environment variable `name` holds; `default` when unset.

    Raises:
        EnvironmentSetupError: `name` is set but not a positive number; the message names it and a valid value.
    """
    text = os.environ.get(name)
    if text is None:
        return default
    try:
        seconds = float(text)
    except ValueError:
        seconds = 0.0
    if seconds <= 0:
        raise EnvironmentSetupError(f"{name}={text!r} is not a positive number of seconds; set e.g. {name}={default:g}")
    return seconds


def whole_number(name: str, default: int) -> int:
    """The whole number >= 0 the environment variable `name` holds; `default` when unset.

    Raises:
        EnvironmentSetupError: `name` is set but not a whole number >= 0; the message names it and a valid value.
    """
    text = os.environ.get(name)
    if text is None:
        return default
    if not text.strip().isdigit():
        raise EnvironmentSetupError(f"{name}={text!r} is not a whole number >= 0; set e.g. {name}={default}")
    return int(text)


def on_or_off(name: str, default: bool) -> bool:
    """Whether the environment variable `name` is `1` (on) or `0` (off); `default` when unset.

    Raises:
        EnvironmentSetupError: `name` is set to anything else; the message names it and both valid values.
    """
    text = os.environ.get(name)
    if text is None:
        return default
    if text.strip() not in ("0", "1"):
        raise EnvironmentSetupError(f"{name}={text!r} is neither 1 (on) nor 0 (off); set e.g. {name}={int(default)}")
    return text.strip() == "1"
