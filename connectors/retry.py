"""One bounded retry policy for every sink: exponential backoff with jitter, capped."""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass
from typing import Callable, TypeVar

from connectors.errors import TransientError

__all__ = ["Backoff", "Retry"]

T = TypeVar("T")
log = logging.getLogger("impulse.connectors")


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff: `base_s` × 2ⁿ seconds, capped at `cap_s`, with ±50 % ("equal") jitter."""

    base_s: float = 0.1
    cap_s: float = 5.0

    def delay(self, failures: int, rng: random.Random = random._inst) -> float:
        """Seconds to wait after the `failures`-th consecutive failure (1, 2, …)."""
        full = min(self.cap_s, self.base_s * (2 ** (failures - 1)))
        return full / 2 + rng.random() * full / 2


@dataclass(frozen=True)
class Retry:
    """Call a function up to `attempts` times while it raises one of `retry_on`.

    `attempts` counts the first call (1 = no retry). An exception may carry ``retry_after_s`` (a
    server's Retry-After): it then replaces the backoff delay, still capped by ``cap_s × 4``.
    """

    attempts: int = 4
    backoff: Backoff = Backoff()
    retry_on: tuple[type[BaseException], ...] = (TransientError,)

    def call(self, fn: Callable[[], T], *, what: str = "call",
             sleep: Callable[[float], None] = time.sleep) -> T:
        failures = 0
        while True:
            try:
                return fn()
            except self.retry_on as exc:
                failures += 1
                if failures >= self.attempts:
                    raise
                wait = getattr(exc, "retry_after_s", None)
                wait = self.backoff.delay(failures) if wait is None else min(wait, self.backoff.cap_s * 4)
                log.warning("%s failed (%s), retry %d/%d in %.2fs", what, exc, failures, self.attempts - 1, wait)
                sleep(wait)
