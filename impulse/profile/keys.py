"""Foreign keys between several profiled sources, found by inclusion, generated as ``kind=ref``.

A top-level integer (or numbered STRING) column ``a.x`` refers to ``b.y`` (another source, the same type) when
every non-null value of ``a.x`` in its sample is a value of ``b.y``, and ``b.y`` is unique in its sample (no null, no repeat: `impulse.profile.infer`
made it a ``sequence``, its ``start`` and ``step`` the keys' first value and mean gap). Then:

- ``a.x`` becomes ``kind=ref`` on ``b``: ``refEventsPerSecond`` = b's rate, ``refLimit`` = b's sampled rows,
  ``refStart``/``refStep`` = b's sequence (so every value is a key b's spec generates), ``a.x``'s null rate kept;
- the child's spec gets ``refStartTime`` = `PINNED_START`: a reference needs one pinned timeline, the parent's,
  which this pins apart from the child's own start, so the child runs whenever it starts (``impulse-load`` sets
  ``startTime`` itself) and every value is still one of the keys the parent's spec generates.

So a join of the generated ``a`` and ``b`` finds a match for every non-null ``a.x``, as in the sample: the
match rate (rows of ``a`` with a match / rows of ``a``) is kept. The values' own distribution is not: a
reference picks uniformly among b's entities created by the event's time (`impulse.fields`, ``pick``).

Integer keys are found, and STRING keys that are numbered (one prefix then a number, which
`impulse.profile.infer` generates as a ``sequence`` with a ``format``: the reference writes the same ``format``);
other STRING keys are not (``kind=ref`` writes numbers). A column generated jointly with another
(`impulse.profile.joint`) keeps its pair. A column that is the key of one foreign key is not
the referring column of another (a one-to-one pair refers from the later source to the earlier); a column
included in several keys refers to the one of the same name (case-insensitive), else the earliest source's.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from impulse.profile.spec import Block

__all__ = ["ForeignKey", "find", "apply", "match_rate", "PINNED_START"]

#: the referenced stream's timeline a referring spec's ``refStartTime`` names (give the parent this ``startTime``
#: too for a stream-stream join in which every key exists by the time of the row that refers to it)
PINNED_START = "2026-01-01T00:00:00Z"


@dataclass(frozen=True)
class ForeignKey:
    """``child.column`` refers to ``parent.key``: each a source's index in the profiled list and a column name."""

    child: int
    column: str
    parent: int
    key: str


@dataclass(frozen=True)
class Side:
    """What `find` needs of one source: its name, sample, and each top-level column's generator properties."""

    name: str
    sample: DataFrame
    families: dict[str, str]
    blocks: list[Block]

    def properties(self, column: str) -> dict[str, str]:
        return next((dict(b.properties) for b in self.blocks if b.path == column), {})


#: the families a key may have: integers, or STRING keys written by a ``sequence`` with a ``format`` (``C-{:04d}``)
KEY_FAMILIES = ("int", "string")


def _keys(side: Side) -> list[str]:
    """The unique key columns (a ``sequence`` without nulls: of integers, or of numbered STRING keys)."""
    return [b.path for b in side.blocks if "." not in b.path and side.families.get(b.path) in KEY_FAMILIES
            and dict(b.properties).get("kind") == "sequence" and "nullRate" not in dict(b.properties)]


def _included(child: DataFrame, column: str, parent: DataFrame, key: str) -> bool:
    """Whether every non-null value of ``child.column`` is a value of ``parent.key`` (a Spark anti-join)."""
    values = child.select(F.col(f"`{column}`").alias("x")).where(F.col("x").isNotNull())
    keys = parent.select(F.col(f"`{key}`").alias("x"))
    return not values.join(keys, "x", "left_anti").limit(1).collect() and bool(values.limit(1).collect())


def find(sides: list[Side]) -> list[ForeignKey]:
    """The foreign keys among `sides` (module docstring), in source and column order."""
    keys = [_keys(s) for s in sides]
    paired = [{b.path for b in s.blocks if "jointWith" in dict(b.properties)}
              | {dict(b.properties)["jointWith"] for b in s.blocks if "jointWith" in dict(b.properties)} for s in sides]
    found: list[ForeignKey] = []
    used_keys: set[tuple[int, str]] = set()
    for c in reversed(range(len(sides))):  # the later source refers: a one-to-one pair refers to the earlier
        child = sides[c]
        for block in child.blocks:
            column = block.path
            kind = dict(block.properties).get("kind")
            if "." in column or child.families.get(column) not in KEY_FAMILIES or kind in (None, "ref") \
                    or (c, column) in used_keys or column in paired[c]:
                continue
            candidates = [(p, k) for p, ks in enumerate(keys) for k in ks if p != c
                          and sides[p].families.get(k) == child.families.get(column)
                          and (p, k) not in {(f.child, f.column) for f in found}
                          and _included(child.sample, column, sides[p].sample, k)]
            if not candidates:
                continue
            p, k = next(((p, k) for p, k in candidates if k.lower() == column.lower()), candidates[0])
            if (c, column) in {(f.parent, f.key) for f in found} or any(
                    f.child == p and f.column == k for f in found):
                continue
            found.append(ForeignKey(c, column, p, k))
            used_keys.add((p, k))
    return sorted(found, key=lambda f: (f.child, [b.path for b in sides[f.child].blocks].index(f.column)))


def apply(fk: ForeignKey, child_blocks: list[Block], parent: Side, parent_rows: int, parent_rate: float) -> list[Block]:
    """The child's blocks with ``fk.column`` a reference to the parent's key (module docstring)."""
    key = parent.properties(fk.key)
    out = []
    for block in child_blocks:
        if block.path != fk.column:
            out.append(block)
            continue
        props = dict(block.properties)
        ref = ((("nullRate", props["nullRate"]),) if "nullRate" in props else ()) + (
            ("kind", "ref"), ("refEventsPerSecond", f"{parent_rate:.6g}"), ("refLimit", str(parent_rows)),
            ("refStart", key.get("start", "0")), ("refStep", key.get("step", "1"))) + (
            (("format", key["format"]),) if "format" in key else ())
        out.append(Block(block.path, f"{block.comment}; a foreign key to {parent.name}.{fk.key} (every value is "
                         f"one of its keys): a reference to its entities, which keeps a join's match rate", ref))
    return out


def match_rate(child: DataFrame, column: str, parent: DataFrame, key: str) -> float:
    """The share of ``child``'s rows whose ``column`` finds a row of ``parent`` by ``key`` (0 for no rows)."""
    rows = child.count()
    keys = parent.select(F.col(f"`{key}`").alias("x")).distinct()
    matched = child.select(F.col(f"`{column}`").alias("x")).join(keys, "x", "left_semi").count()
    return matched / rows if rows else 0.0
