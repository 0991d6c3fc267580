"""The file sink: JSON lines in a directory, exactly-once by file name.

Each (commit id, batch, partition) writes one file,
``<commit>-<batch>-<partition>~<rows>:<digest>.jsonl`` (the name ends with the input's fingerprint),
first under a name of its own attempt and then renamed into place (atomic on one filesystem): a replayed
partition finds its file and is skipped, a crashed attempt leaves only a temporary file nobody reads.
"""

from __future__ import annotations

import glob
import os
import uuid
from typing import Any, Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSource

from connectors.errors import OptionError, SinkError
from connectors.options import OptionReader
from connectors.protocol import Fingerprint, ProtocolWriter, Sink, WriteIdentity, fingerprint_of, stream_writer
from connectors.rows import json_objects

__all__ = ["NAME", "FileSink", "FileSinkDataSource"]

NAME = "file-sink"


class FileSink(Sink):
    name = NAME

    def __init__(self, path: str) -> None:
        self.path = path

    def check(self) -> None:
        if not os.path.isdir(self.path):
            raise SinkError(f"{NAME}: cannot reach directory {self.path!r} (option 'path'): it does not exist")

    def _stem(self, commit_id: str, batch_id: int, partition: int) -> str:
        return os.path.join(self.path, f"{commit_id}-{batch_id}-{partition}~")

    def _files(self, commit_id: str, batch_id: int, partition: str) -> list[str]:
        """The files of a batch (`partition`: an id or ``*``) in the directory."""
        return glob.glob(os.path.join(glob.escape(self.path), f"{glob.escape(commit_id)}-{batch_id}-{partition}~*.jsonl"))

    def open(self, identity: WriteIdentity) -> Any:
        return None

    def is_committed(self, conn: Any, identity: WriteIdentity) -> bool | Fingerprint:
        found = self._files(identity.commit_id, identity.batch_id, str(identity.partition_id))
        return bool(found) and (Fingerprint.parse(found[0].rsplit("~", 1)[1][:-len(".jsonl")]) or True)

    def committed_beyond(self, commit_id: str, batch_id: int, partitions: int) -> list[int]:
        found = self._files(commit_id, batch_id, "*")
        ids = {int(os.path.basename(f).rsplit("~", 1)[0].rsplit("-", 1)[1]) for f in found}
        return sorted(p for p in ids if p >= partitions)

    def write(self, conn: Any, identity: WriteIdentity, batches: Iterator[pa.RecordBatch]) -> None:
        temporary = os.path.join(self.path, f".{uuid.uuid4().hex}.tmp")
        with open(temporary, "wb") as out:
            for batch in batches:
                for line in json_objects(batch).to_pylist():
                    out.write(line.encode() + b"\n")
        stem = self._stem(identity.commit_id, identity.batch_id, identity.partition_id)
        os.replace(temporary, f"{stem}{fingerprint_of(batches) or ''}.jsonl")


class FileSinkDataSource(DataSource):
    """Name: ``file-sink``. Option ``path``: an existing directory; plus the protocol's options."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def streamWriter(self, schema, overwrite: bool) -> ProtocolWriter:
        def build(reader: OptionReader) -> FileSink:
            path = reader.string("path", required=True)
            if not os.path.isabs(path):
                raise OptionError("path", path, "the absolute path of an existing directory")
            return FileSink(path)

        return stream_writer(self.options, name="file sink", build=build)
