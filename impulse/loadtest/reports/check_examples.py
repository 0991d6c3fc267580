"""``--check``'s example rows as a table: the rows `impulse.answer.compare` keeps, one per line, parsed back.

`CheckResult.examples` holds, per kind of difference (``lost``, ``duplicated``, ``unexpected``), up to
`impulse.answer.EXAMPLES` strings ``ROW_JSON (expected E, delivered D)``: the row as Spark's
``to_json`` rendered it and how often it was expected and delivered. `example_table` turns them into the
columns of the rows and one record per example, which the HTML report shows as a table.
"""

from __future__ import annotations

import json
import re
from typing import Mapping, Sequence

__all__ = ["ExampleRow", "example_rows", "example_table"]

_EXAMPLE = re.compile(r"^(?P<row>.*) \(expected (?P<expected>\d+), delivered (?P<delivered>\d+)\)$", re.S)
KINDS = ("lost", "duplicated", "unexpected")


class ExampleRow(dict):
    """One example: ``kind``, ``expected``, ``delivered`` (None where the text did not say) and ``row``, the row's
    columns (a dict; ``{"row": TEXT}`` for a row that is not a JSON object)."""


def example_rows(examples: Mapping[str, Sequence[str]]) -> list[ExampleRow]:
    """Every example of `examples` (kind → strings), in the order lost, duplicated, unexpected, then any other."""
    kinds = [k for k in KINDS if k in examples] + [k for k in examples if k not in KINDS]
    out = []
    for kind in kinds:
        for text in examples[kind]:
            match = _EXAMPLE.match(str(text))
            raw = match["row"] if match else str(text)
            try:
                row = json.loads(raw)
            except ValueError:
                row = None
            out.append(ExampleRow(kind=kind, expected=int(match["expected"]) if match else None,
                                  delivered=int(match["delivered"]) if match else None,
                                  row=row if isinstance(row, dict) else {"row": raw}))
    return out


def example_table(examples: Mapping[str, Sequence[str]]) -> tuple[list[str], list[list]]:
    """The columns (kind, expected, delivered, then the rows' columns in first-seen order) and one list of cells per
    example; a column a row lacks is None, a nested value is its compact JSON."""
    rows = example_rows(examples)
    columns: list[str] = []
    for example in rows:
        columns += [c for c in example["row"] if c not in columns]
    cells = [[example["kind"], example["expected"], example["delivered"],
              *(_cell(example["row"].get(c)) for c in columns)] for example in rows]
    return ["kind", "expected", "delivered", *columns], cells


def _cell(value):
    return json.dumps(value, separators=(",", ":"), sort_keys=True) if isinstance(value, (dict, list)) else value
