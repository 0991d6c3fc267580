"""Errors raised by impulse's source and sinks.

The hierarchy::

    ConnectorError
     ├── OptionError (also a ValueError)    bad or missing option, found when the query starts
     └── SinkError                          a sink could not do its job
          ├── TransientError                may succeed if retried (connection lost, 5xx, 429, timeout)
          ├── DeliveryError                 the target refused data (4xx, message too large, no topic)
          ├── CommitError                   a batch could not be made durable in the target
          ├── FencedError                   another writer took over this writer's identity
          └── PartitioningChangedError      a replayed batch's partition holds other rows than the run that
                                            committed it (the partitioning before the sink changed)

A failed write is never logged and ignored: it raises, so Spark fails the task and, after its
retries, the batch and the query. Nothing acknowledged is lost by raising, because a re-run batch is
recognised by the offset-commit protocol (`connectors.protocol`).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator

__all__ = [
    "map_errors",
    "ConnectorError",
    "OptionError",
    "SinkError",
    "TransientError",
    "DeliveryError",
    "CommitError",
    "FencedError",
]


class ConnectorError(Exception):
    """Root of every error raised by this project."""


class OptionError(ConnectorError, ValueError):
    """Raised when the query starts if an option is missing, unknown or has a value that is not allowed.

    The message names the option, the value given (``repr``) and what is allowed.
    """

    def __init__(self, option: str, value: object, expected: str) -> None:
        self.option = option
        self.value = value
        self.expected = expected
        super().__init__(f"invalid value {value!r} for option '{option}': expected {expected}")


class SinkError(ConnectorError):
    """Raised when a sink cannot write to or commit in its target."""


class TransientError(SinkError):
    """Raised for a failure that may succeed if retried: lost connection, 5xx, 429, timeout."""


class DeliveryError(SinkError):
    """Raised when the target refuses data for good: a 4xx response, an unknown topic, a record too large."""


class CommitError(SinkError):
    """Raised when the driver cannot record a batch as committed in the target."""


class FencedError(SinkError):
    """Raised when another writer with the same identity (a newer task attempt or query) took over."""


class PartitioningChangedError(SinkError):
    """Raised when a replayed batch's partition differs from what an earlier run committed for it.

    Not retried: the input, not the target, is what changed (see `connectors.protocol`).
    """


@contextmanager
def map_errors(translate: Callable[[Exception], "ConnectorError | None"], *, note: str | None = None) -> Iterator[None]:
    """Translate a client library's exception into this project's at a boundary (``raise … from exc``).

    `translate` returns the error to raise instead, or None to let the exception through. Errors of
    this project pass through untouched, with `note` (where it happened) added to them.
    """
    try:
        yield
    except ConnectorError as exc:
        if note:
            exc.add_note(note)
        raise
    except Exception as exc:
        mapped = translate(exc)
        if mapped is None:
            raise
        raise mapped from exc
