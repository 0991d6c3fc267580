"""The order of a benchmark's rounds: uncounted warm-up rounds first, then counted ones."""

from __future__ import annotations

from typing import Iterator, Sequence


def rounds(contenders: Sequence[str], repeat: int, warmup_rounds: int) -> Iterator[tuple[str, bool, str]]:
    """Yield ``(label, counted, contender)`` for `warmup_rounds` uncounted rounds, then `repeat` counted ones.

    Each round runs every contender once, the order rotated by one each round, so each contender goes
    first once in every ``len(contenders)`` rounds and no order favours one. `label` is ``"warm-up"`` or
    ``"round k/repeat"``.
    """
    for round_ in range(-warmup_rounds, repeat):
        shift = round_ % len(contenders)
        label = "warm-up" if round_ < 0 else f"round {round_ + 1}/{repeat}"
        for contender in [*contenders[shift:], *contenders[:shift]]:
            yield label, round_ >= 0, contender
