"""What a latency measures, in words: the one table every latency row, chart and legend of the reports names.

A run's latency is one of these definitions (its ``summary.latencyDefinition`` in report.json, the name here):

- ``end-to-end``: each event's scheduled time → the sink's acknowledgement (the direct topology, and through Kafka
  into the project's sinks, which measure from each row's ``timestamp``);
- ``event-time``: the output's ``--event-time-column`` → the sink's acknowledgement, per output row;
- ``micro-batch``: per micro-batch, its newest input event's schedule → the batch's commit;
- ``commit``: a committed table's (Spark's file sinks, Delta): each event's schedule → the commit that made the
  micro-batch reading it visible (`impulse.loadtest.measure.commit_time`);
- ``pipeline``: through Kafka, the pipeline's own part: each input record's commit into the input topic → its
  output record's append to the output topic (outputs that carry the event's ``subtask_index`` and ``counter``);
- ``via-end-to-end`` / ``via-event-time``: through Kafka, each event's schedule (or the output's event-time
  column) → its output record's append to the output topic, the producer's part included;
- ``producer``: through Kafka, each event's schedule → the producer's commit of it into the input topic.

``schedule delay`` and ``delivery`` are the two parts of a direct run's (and the producer's) end-to-end latency
(`impulse.loadtest.measure.metrics`).
"""

from __future__ import annotations

__all__ = ["DEFINITIONS", "title", "description", "PARTS"]

# name → (a row's title, what it measures)
DEFINITIONS = {
    "end-to-end": ("end-to-end", "each event's schedule → the sink's acknowledgement"),
    "event-time": ("event-time", "the output's --event-time-column → the sink's acknowledgement, per output row"),
    "micro-batch": ("per micro-batch", "per micro-batch: its newest input event's schedule → the batch's commit (the "
                                       "output keeps no timestamp; give --event-time-column for event-time latency)"),
    "commit": ("to commit", "each event's schedule → the commit that made its micro-batch visible in the table (the "
                            "file sink's _spark_metadata entry, Delta's commit timestamp of the version)"),
    "pipeline": ("pipeline", "the pipeline's own: each input record's commit into the input topic → its output "
                             "record's append to the output topic"),
    "via-end-to-end": ("scheduled → output", "through Kafka: each event's schedule → its output record's append to "
                                             "the output topic (the producer's part included)"),
    "via-event-time": ("event-time → output", "through Kafka: the output's --event-time-column → its record's "
                                              "append to the output topic, per output row"),
    "producer": ("producer", "each event's schedule → the producer's commit of it into the input topic"),
}
# the parts of an end-to-end latency: (key in report.json, title, what it measures)
PARTS = (("scheduleDelay", "schedule delay", "each event's schedule → the start of the micro-batch that read it"),
         ("delivery", "delivery", "that micro-batch's start → the acknowledgement of the event's partition"))


def title(name: str | None) -> str:
    """A row's or a legend's name for the definition `name` (an unknown name as it is; None: ``end-to-end``)."""
    return DEFINITIONS.get(name or "end-to-end", (name, ""))[0]


def description(name: str | None) -> str:
    """What the definition `name` measures, in one line (an unknown name: the name)."""
    return DEFINITIONS.get(name or "end-to-end", (name, name))[1] or str(name)
