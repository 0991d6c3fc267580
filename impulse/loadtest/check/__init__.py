"""``--check``: the answer under load. The target is read back and compared with an expected answer.

Modules: `judge` (the expected answer, decided before the load and computed after it, and the one comparison),
`readback` (the target read back), `expect` (``--expect``'s reference rows), `stream_twin` (the answer of a query
Spark runs on streams only, as one micro-batch), `unique` (``--check-unique``: each key once in the target). The
comparison itself is `impulse.answer`'s, shared with
``impulse-nexmark --check``.

The events are a pure function of the source options and the timeline, so the harness reads the same events
again (the run's options, ``startTime`` pinned to the run's schedule start) and computes the expected answer
from them, one of three ways, decided before the load (`judge.expectation`; the summary and report.json's
``checkDetail.basis`` say which):

- the **batch twin**: the same transform (`impulse.loadtest.query.transform.build`) over ``spark.read`` of the
  events (`judge.batch_events`);
- **one micro-batch**: for a transform Spark refuses on a batch DataFrame because it holds an operator Spark
  runs on streams only (``dropDuplicatesWithinWatermark``, ``applyInPandasWithState``), the same transform over
  ``spark.readStream`` of the events (`judge.stream_events`) run as ONE micro-batch
  (`impulse.loadtest.check.stream_twin`): the answer the query gives when no event arrives late;
- ``--expect MODULE:FUNCTION``: the user's reference rows over the batch read (`impulse.loadtest.check.expect`).

Without ``--expect`` the check proves the stream equals the same query run as a batch (or as one micro-batch)
over the same events, so a logic bug present in both passes; with it, that the stream equals the user's own
answer. The expected answer is then compared with what the target holds:

- **append**: every row delivered, as a multiset, against the rows of the expected answer that are final under
  the stream's last watermark: with a finality rule (``--event-time-column COL``, or a Nexmark query's own), the
  rows whose rule value is ≤ that watermark (Spark appends a window once the watermark passed its end, so the
  windows still open when the run stopped are not expected); without one, every row (a filter, a projection, a
  join with a static table or an inner stream-stream join appends each row when its input arrives).
- **update / complete**: the final state per key, where the target keeps one row per key: redis-sink
  ``target=string`` with ``keyColumn``, or ``target=hash`` with ``fieldColumn``; the values held are compared,
  as a set of rows, with the whole expected answer. Other targets are refused before the load (exit 2). (Spark
  writes the project's sinks, Python data sources, in append or complete mode only: update is refused.)
- a Nexmark query with its own batch answer (``Query.answer``: q4, q6, q15, q16) is compared with that answer
  under the stream's last watermark; one with ``latest_by`` (an update stream, e.g. q6 in append mode) by its
  final state: the delivered rows reduced to the last row per ``key`` (`impulse.answer.latest`).

With ``--check-unique COLS`` the delivered rows, as written, must also hold each value of those columns once (a dedup
stage's contract, which the comparison alone cannot see when the expected answer holds the same redelivered
copies): the rows repeating a key are the result's ``repeated`` and fail the check (`unique.repeats`).

`judge.judge` is the comparison itself, which the Kafka topology's check (`impulse.loadtest.via.check`) uses too.

Rows are compared as JSON (`impulse.answer.compare`, which impulse-nexmark's ``--check`` uses too): the target's
values (the sinks render each row with `connectors.rows.json_objects`) are parsed with the answer's schema; a row
the schema cannot parse is unexpected.
"""
