"""Nexmark on Spark: the reference generator as the ``nexmark`` source, the queries q0–q22, the runner."""
