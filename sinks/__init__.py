"""The sinks: Kafka, webhook and Redis, all on the offset-commit protocol of `connectors.protocol`.

Each sink is a package (``sinks/<name>/``): ``sink.py`` (the data source and the protocol's hooks), ``options.py``,
its client layer and ``adapter.py`` (its conformance adapter). A package's ``__init__`` imports nothing: its
public names resolve on first use (`lazy_names`), so importing one module of a sink never imports the others.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any, Callable, Mapping

__all__ = ["lazy_names"]


def lazy_names(package: str, names: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for `package` that imports ``names[attribute]`` (a module of the package, relative
    name) on the first access of `attribute` and returns the attribute; AttributeError for any other name."""

    def getattr_(attribute: str) -> Any:
        module = names.get(attribute)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {attribute!r}")
        return getattr(import_module(f"{package}.{module}"), attribute)

    return getattr_
