"""Pairs of dependent categories generated jointly: Cramér's V of the sample, ``jointWith`` in the spec, the
pair's TV distance in the report.

Two top-level columns both generated from a dictionary (``kind=values``) whose Cramér's V on the sample's rows
where both are non-null exceeds the bound (``--joint-above``, `DEFAULT_BOUND`) are generated jointly: both list
the combinations seen (the first column's value of each, the second's), with the combinations' counts as both
weights, and the second draws its position with the first's stream (``jointWith``, `impulse.fields`). So a
``GROUP BY a, b`` of the generated rows sees the sample's combinations at their frequencies; each column keeps
its own null rate. Like a dictionary, a combination seen once is never copied: those seen more than once are
kept when they hold `impulse.profile.infer.SINGLETONS_LEFT` of the rows (all with ``--keep-values`` on both),
else the pair stays independent; so does a pair of more than ``--max-dictionary`` combinations. A column is in
at most one pair: the strongest pairs first (V descending, then schema order). TIMESTAMP dictionaries stay
independent (their text is not a ``values`` item as Spark writes it).

V = √(χ² / (n · (min(r, c) − 1))) over the r × c table of the pair's counts. `DEFAULT_BOUND` is 0.3: a
moderate association by Cohen's convention, where a ``GROUP BY a, b`` of independent draws already misplaces a
visible share of the rows, and about three times what independent columns show by chance on 1,000 rows of ten
categories each (V ≈ √((max(r, c) − 1) / n) ≈ 0.095; 0.01 on 100,000). A pair listed jointly loses nothing
against independent draws (each column's frequencies are the combinations' sums), so a low bound costs only the
spec's length; on a sample of a few hundred rows raise it above the chance level.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StringType

from impulse.profile.fidelity import Row, tv
from impulse.profile.infer import SINGLETONS_LEFT
from impulse.profile.spec import Block

__all__ = ["Pair", "cramers_v", "find", "apply", "rows", "DEFAULT_BOUND"]

DEFAULT_BOUND = 0.3
_FAMILIES = ("int", "float", "decimal", "string", "date")


@dataclass(frozen=True)
class Pair:
    """Two columns generated jointly: their names, V, and the combinations kept ((a text, b text, count), …)."""

    first: str
    second: str
    v: float
    combinations: tuple[tuple[str, str, int], ...]


def cramers_v(counts: np.ndarray) -> float:
    """Cramér's V of an r × c table of counts (0 when a side has one category or there are no counts)."""
    counts = np.asarray(counts, dtype=np.float64)
    n = counts.sum()
    k = min(counts.shape) - 1
    if n == 0 or k < 1:
        return 0.0
    expected = np.outer(counts.sum(axis=1), counts.sum(axis=0)) / n
    with np.errstate(divide="ignore", invalid="ignore"):
        chi2 = np.where(expected > 0, (counts - expected) ** 2 / expected, 0.0).sum()
    return float(np.sqrt(chi2 / (n * k)))


def _text(column: str) -> F.Column:
    return F.col(f"`{column}`").cast(StringType())


def _combinations(sample: DataFrame, a: str, b: str, cap: int) -> list[tuple[str, str, int]] | None:
    """The pair's (a, b, count) where both are non-null, most frequent first; None beyond `cap` combinations."""
    counts = (sample.where(F.col(f"`{a}`").isNotNull() & F.col(f"`{b}`").isNotNull())
              .groupBy(_text(a).alias("a"), _text(b).alias("b")).count()
              .orderBy(F.desc("count"), F.asc("a"), F.asc("b")).limit(cap + 1).collect())
    return None if len(counts) > cap else [(r["a"], r["b"], int(r["count"])) for r in counts]


def _v(combinations: list[tuple[str, str, int]]) -> float:
    _, a = np.unique([c[0] for c in combinations], return_inverse=True)
    _, b = np.unique([c[1] for c in combinations], return_inverse=True)
    table = np.zeros((a.max() + 1, b.max() + 1))
    np.add.at(table, (a, b), [c[2] for c in combinations])
    return cramers_v(table)


def find(sample: DataFrame, blocks: list[Block], families: dict[str, str], bound: float, max_dictionary: int,
         keep_values: frozenset[str]) -> list[Pair]:
    """The pairs generated jointly (module docstring), strongest first."""
    columns = [b.path for b in blocks if "." not in b.path and dict(b.properties).get("kind") == "values"
               and families.get(b.path) in _FAMILIES]
    scored = []
    for i, a in enumerate(columns):
        for b in columns[i + 1:]:
            combinations = _combinations(sample, a, b, max_dictionary)
            if not combinations:
                continue
            v = _v(combinations)
            if v > bound:
                kept = combinations if a in keep_values and b in keep_values else \
                    [c for c in combinations if c[2] > 1]
                if sum(c[2] for c in kept) >= SINGLETONS_LEFT * sum(c[2] for c in combinations) and \
                        not any("," in c[0] or "," in c[1] for c in kept):
                    scored.append(Pair(a, b, v, tuple(kept)))
    chosen, used = [], set()
    for pair in sorted(scored, key=lambda p: (-p.v, columns.index(p.first), columns.index(p.second))):
        if pair.first not in used and pair.second not in used:
            chosen.append(pair)
            used |= {pair.first, pair.second}
    return chosen


def apply(pair: Pair, blocks: list[Block]) -> list[Block]:
    """`blocks` with the pair's two columns listing its combinations, the second ``jointWith`` the first."""
    weights = ",".join(str(c[2]) for c in pair.combinations)
    out = []
    for block in blocks:
        if block.path not in (pair.first, pair.second):
            out.append(block)
            continue
        first = block.path == pair.first
        other = pair.second if first else pair.first
        props = [(k, v) for k, v in block.properties if k not in ("values", "weights")]
        props += [("values", ",".join(c[0 if first else 1] for c in pair.combinations)), ("weights", weights)]
        if not first:
            props.append(("jointWith", pair.first))
        out.append(Block(block.path, f"{block.comment}; jointly with {other} (Cramér's V {pair.v:.3g}): the "
                         f"{len(pair.combinations)} combinations seen", tuple(props)))
    return out


def _pairs_text(frame: DataFrame, pair: Pair) -> tuple[np.ndarray, int]:
    """(the non-null pairs as text, the rows) of one side."""
    table = frame.select(F.concat_ws("\u241f", _text(pair.first), _text(pair.second)).alias("p"),
                         (F.col(f"`{pair.first}`").isNull() | F.col(f"`{pair.second}`").isNull()).alias("n")).toArrow()
    mask = ~table["n"].to_numpy(zero_copy_only=False)
    return table["p"].to_numpy(zero_copy_only=False)[mask], len(table)


def rows(sample: DataFrame, generated: DataFrame, pairs: list[Pair]) -> list[Row]:
    """One report row per pair: the TV distance of its joint distribution (rows where both are non-null)."""
    out = []
    for pair in pairs:
        a, a_rows = _pairs_text(sample, pair)
        b, b_rows = _pairs_text(generated, pair)
        out.append(Row(f"{pair.first} × {pair.second}", "pair", f"joint (V {pair.v:.3g})", "TV", round(tv(a, b), 6),
                       round(1 - len(a) / max(a_rows, 1), 6), round(1 - len(b) / max(b_rows, 1), 6),
                       round(len(np.unique(a)) / max(len(a), 1), 6), round(len(np.unique(b)) / max(len(b), 1), 6)))
    return out
