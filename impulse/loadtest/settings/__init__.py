"""What a load run is asked to do, parsed and checked before Spark starts.

The values a user writes and the harness's one error, `LoadError` (`units`); the run and the ramp (`config`:
`LoadConfig`, `RampConfig`); the sink under load and its pre-flight check (`target`); the source's ``rateStages``
(`stages`); ``--threshold`` (`thresholds`); ``--via`` and ``--pipeline-trigger`` (`via`).
"""
