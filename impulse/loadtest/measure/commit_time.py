"""When a micro-batch's rows became visible in a committed table: the end of the ``commit`` latency.

A reader of a file sink's directory or of a Delta table sees a micro-batch's rows from the moment its commit is
written, not when its files are: `commit_clock` gives, for the target of a run, a function from a batch id to that
moment (epoch µs) for a target of `kind` ``files`` or ``delta``, or None when it cannot be read here (a remote path, a managed table without ``path``; the
latency then ends at the micro-batch's end, which follows the commit):

- Spark's file sinks (``parquet``, ``json``, ``csv``, ``orc``): the batch's entry in ``DIR/_spark_metadata`` (``N``,
  or ``N.compact`` every tenth batch) is written by the commit; its modification time is the commit's time;
- ``delta``: the version whose ``txn`` action carries the batch id (Delta's streaming sink records the query's id
  and the batch id in the version it commits): that version's ``commitInfo.timestamp`` (ms).
"""

from __future__ import annotations

import json
import os
from typing import Callable
from urllib.parse import urlparse

__all__ = ["commit_clock", "local_path", "DeltaCommits"]

CommitClock = Callable[[int], "int | None"]


def local_path(path: str | None) -> str | None:
    """`path` as a local directory (``file:`` URLs too), None for another file system or none."""
    if not path:
        return None
    url = urlparse(path)
    if url.scheme == "file":
        return url.path
    return path if not url.scheme or len(url.scheme) == 1 else None   # a Windows drive letter is no scheme


def commit_clock(kind: str | None, path: str | None, query_id: str) -> CommitClock | None:
    """Batch id → the epoch µs of its commit in the target at `path`, written by a file sink (`kind` ``files``) or
    Delta's (``delta``) for the query `query_id`; None: not readable here (or another kind)."""
    local = local_path(path)
    if local is None:
        return None
    if kind == "files":
        return lambda batch_id: _file_sink_commit_us(local, batch_id)
    if kind == "delta":
        return DeltaCommits(local, query_id).commit_us
    return None


def _file_sink_commit_us(directory: str, batch_id: int) -> int | None:
    for name in (str(batch_id), f"{batch_id}.compact"):
        try:
            return os.stat(os.path.join(directory, "_spark_metadata", name)).st_mtime_ns // 1_000
        except OSError:
            continue
    return None


class DeltaCommits:
    """The commit times of a Delta table's versions written by one streaming query, read from ``_delta_log`` as
    they appear (each version file parsed once)."""

    def __init__(self, table: str, query_id: str) -> None:
        self.log = os.path.join(table, "_delta_log")
        self.query_id = query_id
        self.next_version = 0
        self.by_batch: dict[int, int] = {}

    def commit_us(self, batch_id: int) -> int | None:
        """The commit time (epoch µs) of the version holding `batch_id`, None if none holds it (yet)."""
        if batch_id not in self.by_batch:
            self._read_new_versions()
        return self.by_batch.get(batch_id)

    def _read_new_versions(self) -> None:
        while True:
            try:
                with open(os.path.join(self.log, f"{self.next_version:020d}.json"), encoding="utf-8") as file:
                    actions = [json.loads(line) for line in file if line.strip()]
            except FileNotFoundError:
                return
            except (OSError, ValueError):
                return   # a version being written: read again at the next call
            self.next_version += 1
            txn = next((a["txn"] for a in actions if "txn" in a and a["txn"].get("appId") == self.query_id), None)
            info = next((a["commitInfo"] for a in actions if "commitInfo" in a), None)
            if txn is not None and info is not None and "timestamp" in info:
                self.by_batch[int(txn["version"])] = int(info["timestamp"]) * 1_000
