"""The load file `impulse-profile` writes: a TOML file that reads like one a person would write, and is the same byte
for byte for the same sample and seed.

Its top-level keys are ``name``, ``schema`` (the sample's schema as DDL) and ``rate`` (events/s; `impulse-load`'s
``--rate`` overrides it), then ``[source]``: ``seed`` (and ``refStartTime`` for a spec that refers to another) and
each leaf's ``fields.<path>.<property>``, in schema order, each leaf's block after a comment saying what was
seen. Every value is a TOML string (JSON's escapes, which TOML's basic strings share).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

__all__ = ["Block", "render"]


@dataclass(frozen=True)
class Block:
    """One leaf's lines: its option path, the comment, its properties (without the ``fields.<path>.`` prefix)."""

    path: str
    comment: str
    properties: tuple[tuple[str, str], ...]


def _string(value: str) -> str:
    return json.dumps(value, ensure_ascii=True)


def render(name: str, schema_ddl: str, rate: float, rate_comment: str, seed: int, blocks: list[Block],
           header: str, source: tuple[tuple[str, str], ...] = ()) -> str:
    """The load file's text (module docstring). `header` is the first comment (where the sample came from);
    `source`: [source] keys written after ``seed`` (``refStartTime`` of a stream that refers to another)."""
    lines = [f"# {line}" for line in header.splitlines()]
    lines += [
        "#   impulse-load run THIS_FILE                  # a load test at the observed rate (--rate overrides it)",
        "",
        f"name = {_string(name)}",
        f"schema = {_string(schema_ddl)}",
        f"rate = {rate:.6g}    # {rate_comment}",
        "",
        "[source]",
        f'seed = "{seed}"',
    ]
    lines += [f"{key} = {_string(value)}" for key, value in source]
    for block in blocks:
        lines.append(f"# {block.path}: {block.comment}")
        lines += [f"{_string(f'fields.{block.path}.{key}')} = {_string(value)}" for key, value in block.properties]
    return "\n".join(lines) + "\n"
