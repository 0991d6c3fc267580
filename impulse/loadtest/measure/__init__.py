"""What a load run measures, and when a rate counts as sustained: the per-batch measurements (`metrics`), the bound of
a sustained rate (`bound`), and what each latency measures, in words (`latency_names`).

Arithmetic over Spark's progress and the sinks' metrics.
"""
