"""The leaves of a schema: every top-level column and, inside ARRAY / MAP / STRUCT, each nested level, addressed by
the paths of `impulse.nested` (``items.element.price``, ``attrs.key``, ``address.city``).

A `Leaf`'s `values` turns a DataFrame into one column ``v`` of that leaf's values: a struct's field among the
non-null structs, an array's elements (or a map's keys, values) exploded from the non-null containers. So a leaf's
null rate is that of its own level, as ``fields.<path>.nullRate`` means it.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column as SparkColumn
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DataType, MapType, StructType

__all__ = ["Leaf", "leaves", "path_text"]


def path_text(path: tuple[str, ...]) -> str:
    """The option path of a leaf: its words joined by dots, a word holding a dot in backquotes."""
    return ".".join(f"`{w}`" if "." in w else w for w in path)


@dataclass(frozen=True)
class Leaf:
    """One level of a column: its path (``("items", "element", "price")``), its Spark type, and the steps from the
    top-level column (``field:<name>``, ``element``, ``key``, ``value``)."""

    path: tuple[str, ...]
    data_type: DataType
    steps: tuple[str, ...]

    @property
    def name(self) -> str:
        """The path as ``fields.<path>.*`` writes it."""
        return path_text(self.path)

    @property
    def container(self) -> bool:
        """Whether the leaf is an ARRAY, MAP or STRUCT (its options are its size and null rate)."""
        return isinstance(self.data_type, (ArrayType, MapType, StructType))

    def values(self, frame: DataFrame) -> DataFrame:
        """One column ``v``: this leaf's values in `frame` (module docstring)."""
        out = frame.select(F.col(f"`{self.path[0]}`").alias("v"))
        for step in self.steps:
            if step.startswith("field:"):
                out = out.where(F.col("v").isNotNull()).select(F.col("v").getField(step[6:]).alias("v"))
            elif step == "element":
                out = out.select(F.explode("v").alias("v"))
            else:
                out = out.select(F.explode(F.map_keys("v") if step == "key" else F.map_values("v")).alias("v"))
        return out

    @staticmethod
    def size(column: SparkColumn) -> SparkColumn:
        """An array's or map's size (null for null)."""
        return F.when(column.isNotNull(), F.size(column))


def leaves(schema: StructType) -> list[Leaf]:
    """Every level of every column, in schema order, a container before what it holds."""
    out: list[Leaf] = []

    def walk(path: tuple[str, ...], data_type: DataType, steps: tuple[str, ...]) -> None:
        out.append(Leaf(path, data_type, steps))
        if isinstance(data_type, StructType):
            for f in data_type.fields:
                walk(path + (f.name,), f.dataType, steps + (f"field:{f.name}",))
        elif isinstance(data_type, ArrayType):
            walk(path + ("element",), data_type.elementType, steps + ("element",))
        elif isinstance(data_type, MapType):
            walk(path + ("key",), data_type.keyType, steps + ("key",))
            walk(path + ("value",), data_type.valueType, steps + ("value",))

    for f in schema.fields:
        walk((f.name,), f.dataType, ())
    return out
