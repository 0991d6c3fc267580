"""impulse-profile: a bounded sample of a table → a load file whose ``[source]`` makes ``format("impulse")`` generate
data like it, and a fidelity report measuring how close the generated data comes.

- `impulse.profile.leaves`: the columns of a schema down to each nested leaf, and the Spark expression that reads
  one leaf's values out of a DataFrame;
- `impulse.profile.measure`: each leaf's statistics with Spark aggregates (the sample is never collected whole);
- `impulse.profile.infer`: statistics → a generator (kind and properties) and a comment saying what was seen (pure);
- `impulse.profile.disorder`: with an ingestion time, the observed disorder as the source's disorder options;
- `impulse.profile.joint`: pairs of dependent categories (Cramér's V) generated jointly;
- `impulse.profile.keys`, `impulse.profile.several`: several sources at once, foreign keys as references;
- `impulse.profile.spec`: the load file (TOML) written from those, deterministically;
- `impulse.profile.fidelity`: the sample against as many generated rows, per leaf (KS, TV, nulls, distinct ratios);
- `impulse.profile.cli`: the ``impulse-profile`` command.
"""
