"""The values a user writes, parsed: rates, durations, counts, ``KEY=VALUE`` pairs, and the one error they raise.

Shared by the run's configuration (`impulse.loadtest.settings.config`), the thresholds and the scenario files.
Every rate is in events/s, every duration in seconds (float) once parsed. A duration takes a unit
(``30s``, ``500ms``, ``2m``, ``1 second``; a bare number means seconds), a rate or a count an optional
``k``/``M`` suffix (``50k`` = 50 000) and ``_`` or ``,`` between digits.
"""

from __future__ import annotations

import datetime as dt
import re

from connectors.options import parse_duration_us

__all__ = ["LoadError", "parse_rate", "parse_seconds", "parse_ramp", "parse_search", "parse_share", "parse_option", "parse_columns",
           "iso_us", "epoch_us", "SEARCH"]

SEARCH = "search"  # ``--ramp search:LO:HI``


class LoadError(Exception):
    """Raised before any load is sent: unknown sink, bad option, unreachable target, bad flag or file.

    The message is one line, meant to be shown as is (the CLI exits with code 2).
    """


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def iso_us(epoch_us: int) -> str:
    """Epoch microseconds → an ISO-8601 time in UTC with its offset (``2026-11-26T06:30:00.123000+00:00``): the
    form of impulse's ``startTime`` option."""
    return (_EPOCH + dt.timedelta(microseconds=epoch_us)).isoformat()


def epoch_us(iso: str) -> int:
    """An ISO-8601 time with its offset, or ``Z`` as Spark's progress writes it → epoch microseconds (`iso_us`'s
    inverse)."""
    return (dt.datetime.fromisoformat(iso.replace("Z", "+00:00")) - _EPOCH) // dt.timedelta(microseconds=1)


_RATE = re.compile(r"^\s*(\d+(?:\.\d*)?(?:e\d+)?|\.\d+)\s*([kKmM]?)\s*$")


def parse_rate(text: str | float, flag: str = "--rate") -> float:
    """``'50000'``, ``'50_000'``, ``'50k'``, ``'1.5M'``, ``'5e4'`` (or a number) → events/s (a count, for counts)."""
    match = _RATE.match(str(text).replace("_", "").replace(",", ""))
    if not match or isinstance(text, bool):
        raise LoadError(f"{flag}: {text!r} is not a rate in events/s (e.g. 50000, 50k, 1.5M)")
    number, suffix = match.groups()
    return float(number) * {"": 1, "k": 1e3, "m": 1e6}[suffix.lower()]


def parse_seconds(text: str | float, flag: str, *, allow_zero: bool = False) -> float:
    """``'30s'``, ``'500ms'``, ``'2m'``, ``'1 second'`` or a number of seconds → seconds (> 0, or ≥ 0 with
    `allow_zero`)."""
    value = str(text).strip()
    try:
        if isinstance(text, bool):
            raise ValueError(text)
        seconds = float(value)
    except ValueError:
        try:
            seconds = parse_duration_us(value, flag) / 1e6
        except ValueError:
            raise LoadError(f"{flag}: {text!r} is not a duration (e.g. 30s, 500ms, 2m, or seconds)") from None
    if seconds < 0 or (seconds == 0 and not allow_zero):
        raise LoadError(f"{flag}: {text!r} must be a duration > 0")
    return seconds


def parse_ramp(text: str, flag: str = "--ramp") -> tuple[float, float, float]:
    """``'10000:10000:200000'`` (start:step:max, events/s; k/M suffixes allowed) → the three rates."""
    parts = str(text).split(":")
    if len(parts) != 3:
        raise LoadError(f"{flag}: {text!r} is not start:step:max in events/s (e.g. 10000:10000:200000 or 10k:10k:200k)")
    return tuple(parse_rate(p, flag) for p in parts)  # type: ignore[return-value]


def parse_search(text: str, flag: str = "--ramp") -> tuple[float, float] | None:
    """``'search:10k:200k'`` → ``(10000.0, 200000.0)`` (LO, HI in events/s); None for a text not starting ``search:``."""
    kind, sep, rest = str(text).partition(":")
    if kind.strip().lower() != SEARCH or not sep:
        return None
    parts = rest.split(":")
    if len(parts) != 2:
        raise LoadError(f"{flag}: {text!r} is not search:LO:HI in events/s (e.g. search:10k:200k)")
    return parse_rate(parts[0], flag), parse_rate(parts[1], flag)


def parse_share(text: str | float, flag: str) -> float:
    """``'5%'``, ``'0.05'`` or 0.05 → 0.05: a share strictly between 0 and 1."""
    value = str(text).strip()
    try:
        if isinstance(text, bool):
            raise ValueError(text)
        share = float(value[:-1]) / 100 if value.endswith("%") else float(value)
    except ValueError:
        raise LoadError(f"{flag}: {text!r} is not a share (e.g. 0.05 or 5%)") from None
    if not 0 < share < 1:
        raise LoadError(f"{flag}: {text!r} must be a share between 0 and 1 (e.g. 0.05 or 5%)")
    return share


def parse_columns(text: str, flag: str) -> tuple[str, ...]:
    """``"subtask_index, counter"`` → the column names (stripped, in order); `LoadError` naming `flag` for an empty
    name or a column named twice."""
    names = [name.strip() for name in str(text).split(",")]
    if not all(names):
        raise LoadError(f"{flag} {text!r}: give column names separated by commas, e.g. 'subtask_index,counter'")
    if len(set(names)) != len(names):
        raise LoadError(f"{flag} {text!r}: a column is named twice")
    return tuple(names)


def parse_option(text: str, flag: str = "--option", example: str = "url=redis://localhost:6379") -> tuple[str, str]:
    """``'url=redis://localhost:6379'`` → ``('url', 'redis://localhost:6379')`` (split at the first ``=``)."""
    key, sep, value = str(text).partition("=")
    if not sep or not key.strip():
        raise LoadError(f"{flag}: {text!r} is not KEY=VALUE (e.g. {flag} {example})")
    return key.strip(), value
