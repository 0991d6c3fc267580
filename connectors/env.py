"""``${ENV:NAME}`` references in option values: secrets are read from the environment where they are used."""

from __future__ import annotations

import os
import re

from connectors.errors import SinkError

__all__ = ["ENV_REF", "resolve_env"]

ENV_REF = re.compile(r"\$\{ENV:([A-Za-z_][A-Za-z0-9_]*)\}")


def resolve_env(value: str, *, sink: str, what: str, where: str = "this executor") -> str:
    """Replace every ``${ENV:NAME}`` in `value` by the environment variable NAME (read now, here). ``SinkError``
    naming `sink`, `what` (the option) and the variable if one is not set."""

    def lookup(match: re.Match) -> str:
        name = match.group(1)
        if name not in os.environ:
            raise SinkError(f"{sink}: {what} references the environment variable {name}, which is not set on "
                            f"{where}; set it there (for executors: spark.executorEnv.{name})")
        return os.environ[name]

    return ENV_REF.sub(lookup, value)
