"""The Python worker tuning shared by the source and the sinks."""

from __future__ import annotations

import gc

from connectors import worker


def test_gc_is_frozen_only_inside_a_spark_task(monkeypatch):
    calls = []
    monkeypatch.setattr(gc, "freeze", lambda: calls.append(1))
    monkeypatch.setattr(worker, "_gc_frozen", False)
    worker.freeze_gc_once()
    assert calls == []  # the driver or a test: no TaskContext, nothing frozen
    monkeypatch.setattr(worker.TaskContext, "get", classmethod(lambda cls: object()))
    worker.freeze_gc_once()
    worker.freeze_gc_once()
    assert calls == [1]  # once per worker process
