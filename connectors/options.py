"""Option parsing shared by the source and every sink.

Spark hands a data source its options as strings in a case-insensitive dict. `OptionReader` parses
them once, on the driver, when the query starts: each getter names the option, and a bad value raises
`OptionError` with the option, the value and what is allowed. `OptionReader.finish()` then rejects
any option nobody asked for, so a typo (`eventsPerSecnod`) fails instead of being ignored.

Durations are strings with a unit (``250ms``, ``1.5s``, ``500us``, ``1m``); they parse to integer
microseconds. Times are ISO-8601 (``2026-01-01T00:00:00Z``; no zone means UTC) or integer epoch
milliseconds; they parse to integer epoch microseconds.

Inside ``with recording() as asked:`` every getter of every reader also appends what it was asked for (an
`OptionSpec`: the option, its type and allowed values, its default) to ``asked``: parsing a connector's options
there lists the options it knows, from the code that reads them (the documentation's option tables).
"""

from __future__ import annotations

import difflib
import re
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Iterable, Iterator, Mapping

from connectors.errors import OptionError

__all__ = ["OptionReader", "OptionSpec", "recording", "parse_duration_us", "parse_time_us", "format_duration_us",
           "CATALOG_TABLE_OPTIONS"]

_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-zµ]+)\s*$", re.IGNORECASE)
_UNIT_US = {
    "us": 1, "µs": 1, "micros": 1,
    "ms": 1_000, "millis": 1_000,
    "s": 1_000_000, "sec": 1_000_000, "secs": 1_000_000, "second": 1_000_000, "seconds": 1_000_000,
    "m": 60_000_000, "min": 60_000_000, "mins": 60_000_000, "minute": 60_000_000, "minutes": 60_000_000,
    "h": 3_600_000_000, "hour": 3_600_000_000, "hours": 3_600_000_000,
    "d": 86_400_000_000, "day": 86_400_000_000, "days": 86_400_000_000,
}
_DURATION_EXPECTED = "a duration with a unit, e.g. '250ms', '1.5s', '500us', '1m' (units: us, ms, s, m, h, d)"

# Keys Spark itself may put into a data source's options; never reported as unknown.
_SPARK_KEYS = frozenset({"path", "paths", "checkpointlocation", "queryname"})

#: Why a catalog table of a Python data source cannot work (PySpark 4.3, README "SQL"): ``CREATE TABLE … USING
#: <source> OPTIONS (…)`` hands the source its options once, with ``provider``, ``owner`` and ``option.<name>``
#: copies added; every later ``SELECT`` or ``INSERT INTO`` of the table gets no options at all.
CATALOG_TABLE_OPTIONS = ("Spark drops the OPTIONS of a table created with CREATE TABLE … USING a Python data source "
                         "(later reads and INSERTs get none): use CREATE TEMPORARY VIEW <name> [(columns)] USING "
                         "`<format>` OPTIONS (…) instead, or the DataFrame API")


def parse_duration_us(text: str, option: str = "duration") -> int:
    """Parse ``'250ms'`` style text into integer microseconds (rounded to the nearest µs)."""
    match = _DURATION.match(str(text))
    if not match:
        raise OptionError(option, text, _DURATION_EXPECTED)
    number, unit = match.groups()
    factor = _UNIT_US.get(unit.lower())
    if factor is None:
        raise OptionError(option, text, f"a known unit, not {unit!r} ({_DURATION_EXPECTED})")
    return round(float(number) * factor)


def format_duration_us(us: int) -> str:
    """The shortest exact spelling of a duration in microseconds (``1500000`` → ``'1500ms'``)."""
    for unit, factor in (("d", 86_400_000_000), ("h", 3_600_000_000), ("m", 60_000_000), ("s", 1_000_000), ("ms", 1_000)):
        if us and us % factor == 0:
            return f"{us // factor}{unit}"
    return f"{us}us"


def parse_time_us(text: str, option: str = "time") -> int:
    """Parse ISO-8601 (no zone means UTC) or integer epoch milliseconds into epoch microseconds."""
    value = str(text).strip()
    if re.fullmatch(r"-?\d+", value):
        return int(value) * 1_000
    try:
        parsed = datetime.fromisoformat(value.replace("z", "Z").replace("Z", "+00:00"))
    except ValueError:
        raise OptionError(option, text, "an ISO-8601 time such as '2026-01-01T00:00:00Z' or epoch milliseconds") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    delta = parsed - datetime(1970, 1, 1, tzinfo=timezone.utc)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


@dataclass(frozen=True)
class OptionSpec:
    """One option as a getter of `OptionReader` was asked for it (see `recording`).

    `kind`: the getter (``string``, ``integer``, ``number``, ``boolean``, ``choice``, ``duration``, ``time``;
    ``prefix`` for a family of options, `option` ending in ``*``; ``known`` when only `OptionReader.has` asked,
    which says nothing of the value). `allowed` says what a value may be, as the getter's errors say it, and
    `choices` lists a choice's values. `default` is the default as a user would write it (None: none);
    `default_text` describes instead a default that is not a constant (the getter's ``documented_default``).
    """

    option: str
    kind: str
    allowed: str = ""
    default: str | None = None
    default_text: str | None = None
    required: bool = False
    choices: tuple[str, ...] = ()
    reader: str = ""   #: the reader's `OptionReader.name`, e.g. ``"impulse source"``


_RECORDING: ContextVar[list[OptionSpec] | None] = ContextVar("impulse_option_recording", default=None)


@contextmanager
def recording() -> Iterator[list[OptionSpec]]:
    """Inside the block, every getter of every `OptionReader` appends its `OptionSpec` to the list yielded (in the
    order asked; an option asked twice appears twice)."""
    asked: list[OptionSpec] = []
    token = _RECORDING.set(asked)
    try:
        yield asked
    finally:
        _RECORDING.reset(token)


def _shown(value: object) -> str | None:
    """A default as a user would write it (None stays None: no default)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


class OptionReader:
    """Typed, case-insensitive access to a data source's string options.

    Every getter records the name it was asked for; `finish()` raises `OptionError` for any option
    that was given but never asked for, listing the known names.
    """

    def __init__(self, options: Mapping[str, object], *, name: str) -> None:
        self.name = name
        self._given = {str(k).lower(): (str(k), v) for k, v in options.items()}
        self._known: dict[str, str] = {}

    def _take(self, option: str, kind: str = "known", allowed: str = "", default: object = None, *,
              default_text: str | None = None, required: bool = False, choices: tuple[str, ...] = ()) -> str | None:
        self._known[option.lower()] = option
        asked = _RECORDING.get()
        if asked is not None:
            asked.append(OptionSpec(option, kind, allowed, _shown(default), default_text, required, choices, self.name))
        entry = self._given.get(option.lower())
        return None if entry is None else str(entry[1])

    def has(self, option: str) -> bool:
        """Whether the option was given (and mark it known)."""
        return self._take(option) is not None

    def string(self, option: str, default: str | None = None, *, required: bool = False) -> str | None:
        value = self._take(option, "string", "a string", default, required=required)
        if value is None or value == "":
            if required:
                raise OptionError(option, value, f"a value; set it with .option('{option}', ...) on the {self.name}")
            return default
        return value

    def integer(self, option: str, default: int | None = None, *, minimum: int | None = None,
                maximum: int | None = None, documented_default: str | None = None) -> int | None:
        """An integer (``_`` separators allowed) from `minimum` to `maximum`. `documented_default`: how the
        documentation states a default that is not a constant (the driver's CPU count)."""
        value = self._take(option, "integer", _range("an integer", minimum, maximum), default,
                           default_text=documented_default)
        if value is None:
            return default
        try:
            number = int(value.strip().replace("_", ""))
        except ValueError:
            raise OptionError(option, value, _range("an integer", minimum, maximum)) from None
        if (minimum is not None and number < minimum) or (maximum is not None and number > maximum):
            raise OptionError(option, value, _range("an integer", minimum, maximum))
        return number

    def number(self, option: str, default: float | None = None, *, above: float | None = None,
               minimum: float | None = None) -> float | None:
        """A float; `above` is an exclusive lower bound, `minimum` an inclusive one."""
        expected = "a number" + (f" > {above:g}" if above is not None else "") + (f" ≥ {minimum:g}" if minimum is not None else "")
        value = self._take(option, "number", expected, default)
        if value is None:
            return default
        try:
            number = float(value.strip().replace("_", ""))
        except ValueError:
            raise OptionError(option, value, expected) from None
        if number != number or number in (float("inf"), float("-inf")):
            raise OptionError(option, value, "a finite " + expected)
        if (above is not None and number <= above) or (minimum is not None and number < minimum):
            raise OptionError(option, value, expected)
        return number

    def boolean(self, option: str, default: bool) -> bool:
        value = self._take(option, "boolean", "true or false", default)
        if value is None:
            return default
        lowered = value.strip().lower()
        if lowered in ("true", "1", "yes"):
            return True
        if lowered in ("false", "0", "no"):
            return False
        raise OptionError(option, value, "true or false")

    def choice(self, option: str, choices: Iterable[str], default: str | None = None, *,
               documented_default: str | None = None) -> str | None:
        """One of `choices`, compared case-insensitively; returns the canonical spelling. `documented_default`: how
        the documentation states a default that depends on other options."""
        allowed = list(choices)
        expected = "one of " + ", ".join(repr(c) for c in allowed)
        value = self._take(option, "choice", expected, default, default_text=documented_default, choices=tuple(allowed))
        if value is None:
            return default
        for candidate in allowed:
            if candidate.lower() == value.strip().lower():
                return candidate
        raise OptionError(option, value, expected)

    def duration_us(self, option: str, default: int | None = None, *, positive: bool = True) -> int | None:
        value = self._take(option, "duration", f"a duration {'> 0' if positive else '≥ 0'}, e.g. '250ms', '1.5s', '1m'",
                           None if default is None else format_duration_us(default) if default else "0s")
        if value is None:
            return default
        us = parse_duration_us(value, option)
        if positive and us <= 0:
            raise OptionError(option, value, "a duration > 0 (at least 1us)")
        return us

    def time_us(self, option: str) -> int | None:
        value = self._take(option, "time", "an ISO-8601 time such as '2026-01-01T00:00:00Z' or epoch milliseconds")
        return None if value is None else parse_time_us(value, option)

    def prefixed(self, prefix: str) -> dict[str, str]:
        """Every option starting with `prefix` (case-insensitive), prefix removed, original case kept."""
        self._known[prefix.lower() + "*"] = prefix + "*"
        asked = _RECORDING.get()
        if asked is not None:
            asked.append(OptionSpec(prefix + "*", "prefix", f"any option starting with '{prefix}'",
                                    reader=self.name))
        out = {}
        for lowered, (original, value) in self._given.items():
            if lowered.startswith(prefix.lower()) and len(lowered) > len(prefix):
                out[original[len(prefix):]] = str(value)
        return out

    def misspelt(self, *options: str) -> tuple[str, object, str] | None:
        """The first given option that is none of `options` but spelt close to one of them (case-insensitive):
        ``(given name, its value, the option meant)``, or None. Use it where an option is missing, so that the
        error names the typo (``eventsPerSecnd``) rather than only the missing name."""
        wanted = {o.lower(): o for o in options}
        for lowered, (original, value) in sorted(self._given.items()):
            if lowered in wanted or lowered in self._known:
                continue
            close = difflib.get_close_matches(lowered, wanted, n=1, cutoff=0.8)
            if close:
                return original, value, wanted[close[0]]
        return None

    def finish(self) -> None:
        """Raise `OptionError` for the first option that no getter asked for."""
        if "provider" in self._given and any(k.startswith("option.") for k in self._given):
            original, value = self._given["provider"]
            raise OptionError(original, value, f"no CREATE TABLE: {CATALOG_TABLE_OPTIONS}")
        prefixes = tuple(k[:-1] for k in self._known if k.endswith("*"))
        for lowered, (original, value) in sorted(self._given.items()):
            if lowered in self._known or lowered in _SPARK_KEYS or (prefixes and lowered.startswith(prefixes)):
                continue
            known = ", ".join(sorted(self._known.values(), key=str.lower))
            close = difflib.get_close_matches(lowered, self._known, n=1, cutoff=0.8)
            meant = f"did you mean '{self._known[close[0]]}'? " if close else ""
            raise OptionError(original, value, f"a known option of the {self.name}; unknown option '{original}' "
                                               f"({meant}known: {known})")


def _range(kind: str, minimum: int | None, maximum: int | None) -> str:
    if minimum is not None and maximum is not None:
        return f"{kind} from {minimum} to {maximum}"
    if minimum is not None:
        return f"{kind} ≥ {minimum}"
    if maximum is not None:
        return f"{kind} ≤ {maximum}"
    return kind
