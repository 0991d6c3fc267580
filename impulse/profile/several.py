"""Several sources profiled at once: a spec per source, foreign keys between them as references
(`impulse.profile.keys`), and one fidelity report over all of them with each foreign key's match rate.

The report's columns are named ``<source>.<path>``; its ``keys`` give, per foreign key, the share of the
referring source's rows that find their row in the sample, beside the same share between the generated
sources (each generated from its spec, as many rows as its sample; the references on their ``refStartTime``). The
``MATCH`` bound of ``--min-fidelity`` gates the difference.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from pyspark.sql import DataFrame

from impulse.profile import disorder as disorder_fit
from impulse.profile import fidelity, joint, keys
from impulse.profile.leaves import leaves
from impulse.profile.run import Measured, Result, Settings, generate, measure, write_spec

__all__ = ["Many", "profile_many"]


@dataclass(frozen=True)
class Many:
    """What `profile_many` wrote and measured: one `Result` per source, the foreign keys' lines, what missed."""

    results: list[Result]
    keys: list[fidelity.KeyRow]
    missed: list[str]


def profile_many(sources: list[tuple[DataFrame, Settings]], output, bounds: dict[str, float]) -> Many:
    """Profile each ``(frame, settings)`` (each its own name; all written into `output`) and the foreign keys
    between them (module docstring). Raises `OptionError` for bad input, naming the source's problem."""
    measured = [measure(frame, replace(settings, output=output)) for frame, settings in sources]
    sides = [keys.Side(m.settings.name, m.sample, m.families, m.blocks) for m in measured]
    found = keys.find(sides)
    for fk in found:
        parent = measured[fk.parent]
        child = measured[fk.child]
        child.blocks = keys.apply(fk, child.blocks, sides[fk.parent], parent.rows, parent.rate)
        child.generators[fk.column] = "ref"
        child.source_options["refStartTime"] = keys.PINNED_START
    generated: list[DataFrame] = []
    rows: list[fidelity.Row] = []
    results = []
    for m in measured:
        spec_path, text = write_spec(m)
        frame = generate(m)
        generated.append(frame)
        report = (fidelity.compare(m.sample, frame, leaves(m.sample.schema), m.generators, m.families)
                  + joint.rows(m.sample, frame, m.pairs))
        if m.disorder is not None:
            report += disorder_fit.rows(frame.sparkSession, m.sample, m.disorder, m.settings.seed, m.rate)
        rows += [replace(r, path=f"{m.settings.name}.{r.path}") for r in report]
        results.append(Result(spec_path, text, m.rows, m.rate, report, fidelity.misses(report, bounds)))
    key_rows = [_key_row(fk, measured, generated) for fk in found]
    title = "Fidelity of " + ", ".join(f"{m.settings.name} ({m.rows} rows)" for m in measured) + \
        ": each sample against as many generated rows"
    fidelity.write(output, rows, bounds, title, key_rows)
    for m, frame in zip(measured, generated):
        m.sample.unpersist()
        frame.unpersist()
    missed = [r.path for r in fidelity.misses(rows, bounds)] + [k.name for k in fidelity.key_misses(key_rows, bounds)]
    return Many(results, key_rows, missed)


def _key_row(fk: keys.ForeignKey, measured: list[Measured], generated: list[DataFrame]) -> fidelity.KeyRow:
    child, parent = measured[fk.child], measured[fk.parent]
    sample = keys.match_rate(child.sample, fk.column, parent.sample, fk.key)
    made = keys.match_rate(generated[fk.child], fk.column, generated[fk.parent], fk.key)
    return fidelity.KeyRow(f"{child.settings.name}.{fk.column}", f"{parent.settings.name}.{fk.key}",
                           round(sample, 6), round(made, 6), round(abs(sample - made), 6))
