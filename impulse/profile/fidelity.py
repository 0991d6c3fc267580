"""How close the generated rows come to the sample, per leaf: ``fidelity.json`` and a self-contained
``fidelity.html``.

For every leaf, the sample against as many generated rows (the same `impulse.profile.leaves.Leaf.values`
of each): the null rates and distinct ratios (distinct non-null values / non-null values) of both sides, and one
distance:

- ``TV``, the total-variation distance ½·Σ|p − q| between the value frequencies, for BOOLEAN and for a leaf
  generated from a dictionary (``kind=values``);
- ``LEN`` for other STRING and BINARY leaves: the two-sample Kolmogorov-Smirnov statistic of their lengths (a
  ``faker`` column's lengths are Faker's, so a gate may bound it apart);
- else ``KS``, the two-sample Kolmogorov-Smirnov statistic sup|F₁ − F₂| of the measured numbers (numbers, days,
  µs, collection sizes; `impulse.profile.measure.measured`);
- none for a STRUCT (its null rate only), a built-in column (``timestamp``: the generated events' own time) or
  a reference (``kind=ref``: its values are picked among the referenced entities, not drawn like the sample's).

With several sources (`impulse.profile.several`), each foreign key's line (`KeyRow`): the share of the referring
source's rows that find their row, in the samples and in the generated data; ``MATCH`` bounds the difference.

The two columns of one leaf (N values each) are the only data brought to the driver, one leaf at a time; the
distances are vectorised with numpy.
"""

from __future__ import annotations

import html
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, StringType

from connectors.errors import OptionError
from impulse.profile.leaves import Leaf
from impulse.profile.measure import measured

__all__ = ["Row", "KeyRow", "ks", "tv", "compare", "parse_bounds", "misses", "key_misses", "write", "METRICS"]

METRICS = ("KS", "LEN", "TV", "MATCH")


@dataclass(frozen=True)
class Row:
    """One leaf's line of the report."""

    path: str
    type: str
    generator: str
    metric: str | None
    distance: float | None
    null_sample: float
    null_generated: float
    distinct_sample: float
    distinct_generated: float


@dataclass(frozen=True)
class KeyRow:
    """One foreign key's line: ``source.column`` → ``source.key``, the match rates and their difference."""

    name: str
    refers_to: str
    match_sample: float
    match_generated: float
    distance: float


def ks(a: np.ndarray, b: np.ndarray) -> float:
    """The two-sample KS statistic of two samples of numbers (0 when both are empty, 1 when one is)."""
    if len(a) == 0 or len(b) == 0:
        return 0.0 if len(a) == len(b) else 1.0
    a, b = np.sort(a), np.sort(b)
    points = np.concatenate([a, b])
    cdf_a = np.searchsorted(a, points, side="right") / len(a)
    cdf_b = np.searchsorted(b, points, side="right") / len(b)
    return float(np.max(np.abs(cdf_a - cdf_b)))


def tv(a: np.ndarray, b: np.ndarray) -> float:
    """The total-variation distance between the value frequencies of two samples (0 when both are empty)."""
    if len(a) == 0 or len(b) == 0:
        return 0.0 if len(a) == len(b) else 1.0
    values, inverse = np.unique(np.concatenate([a, b]).astype(str), return_inverse=True)
    p = np.bincount(inverse[: len(a)], minlength=len(values)) / len(a)
    q = np.bincount(inverse[len(a):], minlength=len(values)) / len(b)
    return float(np.abs(p - q).sum() / 2)


def _side(frame: DataFrame, leaf: Leaf, scalar: bool) -> tuple[np.ndarray, np.ndarray, float, float]:
    """(measured non-null numbers, non-null values as text, null rate, distinct ratio) of one leaf."""
    values = leaf.values(frame)
    v = F.col("v")
    table = values.select(measured(v, leaf.data_type).cast(DoubleType()).alias("m"),
                          (v.cast(StringType()) if scalar else F.lit(None).cast(StringType())).alias("t"),
                          v.isNull().alias("null")).toArrow()
    nulls = int(pc.sum(table["null"]).as_py() or 0)
    numbers = table["m"].drop_null().to_numpy()
    texts = table["t"].drop_null().to_numpy(zero_copy_only=False)
    non_null = len(table) - nulls
    distinct = len(pc.unique(table["t"].drop_null())) / non_null if scalar and non_null else 0.0
    return numbers, texts, nulls / max(len(table), 1), distinct


def compare(sample: DataFrame, generated: DataFrame, leaves: list[Leaf], generators: dict[str, str],
            families: dict[str, str]) -> list[Row]:
    """One `Row` per leaf, in schema order (`generators`: each leaf's kind by path; `families`: its family)."""
    rows = []
    for leaf in leaves:
        fam = families[leaf.name]
        scalar = fam not in ("array", "map", "struct")
        a_num, a_text, a_nulls, a_distinct = _side(sample, leaf, scalar)
        b_num, b_text, b_nulls, b_distinct = _side(generated, leaf, scalar)
        kind = generators.get(leaf.name, "")
        if fam == "struct" or kind in ("built-in", "ref"):  # a built-in column is impulse's own (its event time: now)
            metric, distance = None, None
        elif fam == "boolean" or kind == "values":
            metric, distance = "TV", tv(a_text, b_text)
        else:
            metric, distance = ("LEN" if fam in ("string", "binary") else "KS"), ks(a_num, b_num)
        rows.append(Row(leaf.name, leaf.data_type.simpleString(), kind, metric,
                        None if distance is None else round(distance, 6), round(a_nulls, 6),
                        round(b_nulls, 6), round(a_distinct, 6), round(b_distinct, 6)))
    return rows


def parse_bounds(text: str | None) -> dict[str, float]:
    """``KS=0.05,TV=0.05`` → {"KS": 0.05, "TV": 0.05}; raises `OptionError` naming ``--min-fidelity``."""
    if not text:
        return {}
    bounds = {}
    for part in text.split(","):
        key, _, value = part.partition("=")
        key = key.strip().upper()
        try:
            bound = float(value)
        except ValueError:
            bound = -1.0
        if key not in METRICS or not 0 <= bound <= 1:
            raise OptionError("--min-fidelity", text, "comma-separated METRIC=BOUND with METRIC one of "
                              f"{', '.join(METRICS)} and BOUND a distance from 0 to 1, e.g. KS=0.05,LEN=0.1,TV=0.05,MATCH=0.01")
        bounds[key] = bound
    return bounds


def misses(rows: list[Row], bounds: dict[str, float]) -> list[Row]:
    """The rows whose distance exceeds the bound of their metric."""
    return [r for r in rows if r.metric in bounds and r.distance is not None and r.distance > bounds[r.metric]]


def key_misses(rows: list[KeyRow], bounds: dict[str, float]) -> list[KeyRow]:
    """The foreign keys whose match rates differ by more than the ``MATCH`` bound."""
    return [r for r in rows if "MATCH" in bounds and r.distance > bounds["MATCH"]]


def _key_table(rows: list[KeyRow], missed: set[str]) -> str:
    if not rows:
        return ""
    head = ["column", "refers to", "match rate (sample)", "match rate (generated)", "MATCH"]
    body = [("<tr class=\"miss\">" if r.name in missed else "<tr>") + "".join(
        f"<td>{html.escape(c)}</td>" for c in (r.name, r.refers_to, f"{r.match_sample:.4f}",
                                                f"{r.match_generated:.4f}", f"{r.distance:.4f}")) + "</tr>"
            for r in rows]
    return ("<h2>Foreign keys</h2><table><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>\n"
            + "\n".join(body) + "\n</table>")


def write(folder: Path, rows: list[Row], bounds: dict[str, float], title: str, keys: list[KeyRow] = ()) -> None:
    """``fidelity.json`` and ``fidelity.html`` in `folder` (`keys`: the foreign keys' lines, several sources)."""
    missed = {r.path for r in misses(rows, bounds)} | {r.name for r in key_misses(list(keys), bounds)}
    document = {"title": title, "bounds": bounds, "columns": [asdict(r) for r in rows], "missed": sorted(missed)}
    if keys:
        document["keys"] = [asdict(r) for r in keys]
    (folder / "fidelity.json").write_text(json.dumps(document, indent=2) + "\n")
    head = ["column", "type", "generator", "metric", "distance", "null (sample)", "null (generated)",
            "distinct ratio (sample)", "distinct ratio (generated)"]
    body = []
    for r in rows:
        cells = [r.path, r.type, r.generator, r.metric or "", "" if r.distance is None else f"{r.distance:.4f}",
                 f"{r.null_sample:.4f}", f"{r.null_generated:.4f}", f"{r.distinct_sample:.4f}",
                 f"{r.distinct_generated:.4f}"]
        style = ' class="miss"' if r.path in missed else ""
        body.append(f"<tr{style}>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
    bound_text = ", ".join(f"{k} ≤ {v}" for k, v in bounds.items()) or "none"
    (folder / "fidelity.html").write_text(f"""<!doctype html>
<html><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:.3em .6em;text-align:left}}tr.miss{{background:#fdd}}</style></head>
<body><h1>{html.escape(title)}</h1><p>Bounds: {html.escape(bound_text)}; {len(missed)} column(s) missed.</p>
<table><tr>{''.join(f'<th>{h}</th>' for h in head)}</tr>
{chr(10).join(body)}
</table>{_key_table(list(keys), missed)}</body></html>
""")
