"""Running a load: one run, impulse → the sink, watched until every event is committed (`run`), the step mode
(`ramp`), the session's warm-up (`warmup`) and the query's own (`warm_pipeline`), the live progress lines
(`display`) and the embedded HTTP receiver (`receiver`).
"""
