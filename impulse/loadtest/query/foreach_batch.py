"""``--foreach-batch MODULE:FUNCTION``: the user's own writer in place of a sink, Spark's ``foreachBatch``.

Contract: ``FUNCTION(batch_df, batch_id)`` is called by Spark once per micro-batch with that batch's output (a batch
DataFrame) and its id, and writes it wherever it likes (a MERGE upsert, a JDBC write). Spark retries a failed batch
with the same id after a restart, so a function meant to be exactly-once makes its write idempotent per batch id.
MODULE is found before Spark starts and loaded and shipped once the session exists exactly as ``--transform``'s
(`impulse.loadtest.query.transform`); when it is loaded, a FUNCTION that cannot be called with two positional
arguments is refused (`LoadError` naming the flag), before any event is produced.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

from impulse.loadtest.query.transform import Transform, function_of, load, ship
from impulse.loadtest.settings.units import LoadError

__all__ = ["resolve", "writer_function"]

FLAG = "--foreach-batch"


def resolve(text: str) -> Transform:
    """``MODULE:FUNCTION`` found before Spark starts (`impulse.loadtest.query.transform.function_of`)."""
    return function_of(text, FLAG, "my_sink:upsert")


def writer_function(spark, resolved: Transform) -> Callable[[Any, int], Any]:
    """The user's function imported and shipped on `spark`, its signature checked: it takes (batch_df, batch_id)."""
    function = load(spark, resolved).function
    ship(spark, resolved)
    try:
        inspect.signature(function).bind(None, 0)
    except TypeError:
        raise LoadError(f"{FLAG} {resolved.text}: {resolved.function_name}{inspect.signature(function)} cannot be "
                        "called as FUNCTION(batch_df, batch_id): give a function of two arguments") from None
    except ValueError:  # a builtin without a signature: Spark will call it
        pass
    return function
