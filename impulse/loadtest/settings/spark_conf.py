"""``--conf KEY=VALUE`` and ``--packages COORDINATES``: the Spark settings of the session the harness makes.

`session_conf` is what the session is built with: ``--conf``'s settings, with ``--packages``'s Maven coordinates
joined into ``spark.jars.packages`` (after any given by ``--conf``). A session already running in the process
(``main()`` called where one exists) keeps its settings: `refuse_unapplied` then refuses, naming the flag, each
setting the session does not hold, instead of running with settings the user did not get (exit 2, before any
load).
"""

from __future__ import annotations

from typing import Mapping, Sequence

from impulse.loadtest.settings.units import LoadError
from impulse.session import is_remote

__all__ = ["PACKAGES", "session_conf", "refuse_unapplied"]

PACKAGES = "spark.jars.packages"


def session_conf(conf: Mapping[str, str], packages: Sequence[str]) -> dict[str, str]:
    """``--conf``'s settings with ``--packages`` joined into ``spark.jars.packages``."""
    merged = {key: str(value) for key, value in conf.items()}
    coordinates = [c.strip() for text in (merged.get(PACKAGES, ""), *packages) for c in text.split(",") if c.strip()]
    if coordinates:
        merged[PACKAGES] = ",".join(dict.fromkeys(coordinates))
    return merged


def refuse_unapplied(spark, conf: Mapping[str, str], packages: Sequence[str]) -> None:
    """`LoadError` naming ``--conf`` / ``--packages`` when `spark` does not hold a setting `session_conf` gives."""
    for key, value in session_conf(conf, packages).items():
        try:
            held = spark.conf.get(key, None)
        except Exception:  # noqa: BLE001 - a setting the session cannot read counts as not held
            held = None
        if key == PACKAGES:
            if not is_remote(spark):  # the context's own: a running session's getOrCreate sets only its SQL conf
                held = spark.sparkContext.getConf().get(PACKAGES, None)
            missing = [c for c in value.split(",") if c not in (held or "").split(",")]
            if missing:
                raise LoadError(f"--packages {','.join(missing)}: the Spark session was already running without them "
                                "(a running session's packages cannot change): run impulse-load in a new process")
        elif held != value:
            raise LoadError(f"--conf {key}={value}: the Spark session holds {key}={held} (a static setting of a session "
                            "already running cannot change): run impulse-load in a new process")
