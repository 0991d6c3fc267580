"""How a run is reported: the summary and the files of ``--output DIR`` (`report`), ``report.html`` (`html`), the PNG
(`plot`), ``--junit`` (`junit`), PASS or FAIL and the exit code (`verdict`), live Prometheus metrics (`prometheus`),
and ``impulse-load compare DIR…`` (`compare`); `sections` and `check_examples` read report.json back for them.
"""
