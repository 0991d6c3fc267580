"""The end of the ``commit`` latency (`impulse.loadtest.measure.commit_time`): a file sink's ``_spark_metadata``
entry's time, a Delta version's commit timestamp found by the batch id its ``txn`` action carries."""

from __future__ import annotations

import json
import os

from impulse.loadtest.measure.commit_time import commit_clock, local_path


def test_a_file_sink_s_commit_is_its_metadata_entry_s_time_compacted_or_not(tmp_path):
    log = tmp_path / "_spark_metadata"
    log.mkdir()
    for name, seconds in (("0", 1_000), ("9.compact", 2_000)):
        (log / name).write_text("v1\n")
        os.utime(log / name, ns=(seconds * 10**9, seconds * 10**9 + 7_000))
    clock = commit_clock("files", f"file://{tmp_path}", "q")
    assert (clock(0), clock(9), clock(1)) == (1_000_000_007, 2_000_000_007, None)
    assert commit_clock("files", "s3a://bucket/events", "q") is None      # not readable here: the batch's end
    assert commit_clock(None, str(tmp_path), "q") is None


def _version(log, version: int, *actions: dict) -> None:
    (log / f"{version:020d}.json").write_text("".join(json.dumps(a) + "\n" for a in actions))


def test_a_delta_commit_is_the_timestamp_of_the_version_holding_the_query_s_batch(tmp_path):
    log = tmp_path / "_delta_log"
    log.mkdir()
    clock = commit_clock("delta", str(tmp_path), "query-1")
    assert clock(0) is None                                                  # no version yet
    _version(log, 0, {"commitInfo": {"timestamp": 100}}, {"metaData": {}})   # the table's creation: no batch
    _version(log, 1, {"commitInfo": {"timestamp": 205}}, {"txn": {"appId": "query-1", "version": 0}})
    _version(log, 2, {"commitInfo": {"timestamp": 300}}, {"txn": {"appId": "other-query", "version": 1}})
    assert (clock(0), clock(1)) == (205_000, None)
    _version(log, 3, {"txn": {"appId": "query-1", "version": 1}}, {"commitInfo": {"timestamp": 412}})
    assert clock(1) == 412_000                                               # versions written later are read then


def test_local_paths():
    assert (local_path("/a/b"), local_path("file:///a/b"), local_path("hdfs://n/a"), local_path(None)) == (
        "/a/b", "/a/b", None, None)
