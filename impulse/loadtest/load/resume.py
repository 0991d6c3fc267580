"""``--checkpoint DIR``: a run whose query resumes from the checkpoint an earlier run on DIR left (a crash, a stop).

Contract. A rerun of the same command on DIR resumes the query where its last committed micro-batch left it:
Spark runs again a batch the earlier run planned but did not commit (its offsets are in ``DIR/offsets``, its
commit is not in ``DIR/commits``), then goes on. The source keeps its schedule: the harness runs it with
``downtime=catchup`` (`impulse.loadtest.load.events.impulse_options`), so every event keeps the scheduled time
the first run's offsets gave it and the events due while the query was down come at once; the schedule's start
(``startTime`` of the offsets) is the first run's. So the rerun's ``--check`` compares the target with every event
of the schedule, those committed by the earlier runs included: a target written exactly once (Spark's file sink,
Delta) passes, a non-idempotent writer whose replayed batch was written twice shows that batch's rows as duplicates.

What a resumed run's report measures (`resumed_info`, ``summary.resumed``): its micro-batches are the rerun's
own, and each event's latency runs from its original scheduled time, so the events due while the query was down
carry the downtime; its events count every event committed since the schedule's start; its time to deliver them
(duration + drain) counts from its own start, not the schedule's. Its rate and verdict are
not a steady-state measure of the pipeline: a resumed run proves the target's answer, not its throughput.

The target of a resumed run holds the earlier runs' rows, so ``--check``'s test that it starts empty is skipped.
A checkpoint whose last committed batch already holds every event of the schedule (`committed_events`) leaves
nothing to resume: the run is refused before Spark starts.
"""

from __future__ import annotations

import json
import os
from typing import Sequence

from impulse.loadtest.measure.commit_time import local_path
from impulse.loadtest.measure.metrics import Batch

__all__ = ["resumes", "committed_events", "resumed_info", "describe_resumed"]


def resumes(checkpoint: str | None) -> bool:
    """Whether the query on `checkpoint` (``--checkpoint``; None: a new temporary one) resumes an earlier run's: a
    local directory whose ``offsets`` log holds a planned batch. One on another file system (``s3a://``, …) cannot
    be looked at here: False (Spark resumes it all the same; the report then does not say so)."""
    local = local_path(checkpoint)
    if local is None:
        return False
    offsets = os.path.join(local, "offsets")
    return os.path.isdir(offsets) and any(name.isdigit() for name in os.listdir(offsets))


def committed_events(checkpoint: str | None) -> int | None:
    """The events the checkpoint's last committed micro-batch had delivered in all (the sum of the counters of its
    end offset, the first source's that has them); None: no committed batch, or not a local checkpoint."""
    local = local_path(checkpoint)
    commits = os.path.join(local, "commits") if local is not None else None
    if commits is None or not os.path.isdir(commits):
        return None
    ids = [int(name) for name in os.listdir(commits) if name.isdigit()]
    path = os.path.join(local, "offsets", str(max(ids))) if ids else None
    if path is None or not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as file:
        lines = file.read().splitlines()[2:]   # "v1", the batch's metadata, then one offset per source
    for line in lines:
        try:
            offset = json.loads(line)
        except ValueError:
            continue
        if isinstance(offset, dict) and isinstance(offset.get("counters"), list):
            return sum(int(c) for c in offset["counters"])
    return None


def resumed_info(checkpoint: str, batches: Sequence[Batch]) -> dict:
    """``summary.resumed`` of a resumed run: its checkpoint, the first micro-batch it ran and the events the earlier
    runs had committed before it (None without a batch)."""
    first = batches[0] if batches else None
    return {"checkpoint": checkpoint, "firstBatchId": first.batch_id if first is not None else None,
            "eventsBefore": first.delivered - first.rows if first is not None else None}


def describe_resumed(resumed: dict) -> str:
    """One sentence from ``summary.resumed`` (`resumed_info`) saying what a resumed run's figures cover: the
    checkpoint, the micro-batch it resumed at, the events committed before it, and how its latency, events and time
    are counted. The text summary and the HTML report both show it."""
    before = resumed.get("eventsBefore")
    batch = resumed.get("firstBatchId")
    return (f"resumed from --checkpoint {resumed.get('checkpoint')} at micro-batch "
            f"{batch if batch is not None else '?'}: {f'{before:,}' if before is not None else '?'} events committed "
            "by earlier runs; latency runs from each event's original schedule (the downtime included), events count "
            "every run's, time counts from this run's start: it proves the target's answer, not a steady-state rate")
