"""The file sink's conformance adapter, which owns the one reader of its target (`FileReader`)."""

from __future__ import annotations

import argparse
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Mapping

from connectors.conformance.adapter import SinkAdapter
from connectors.readback import CannotReadBack, TargetReader
from tests.file_sink.sink import NAME

__all__ = ["FileAdapter", "FileReader"]


class FileAdapter(SinkAdapter):
    """The file sink writing under a directory (one subdirectory per namespace)."""

    format = NAME

    def __init__(self, root: str) -> None:
        self.root = Path(root)

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--dir", help="the directory to write under (default: a new temporary one)")

    @classmethod
    @contextmanager
    def from_arguments(cls, args: argparse.Namespace) -> Iterator["FileAdapter"]:
        if args.dir:
            yield cls(args.dir)
            return
        with tempfile.TemporaryDirectory(prefix="file-sink-") as root:
            yield cls(root)

    @classmethod
    def reader(cls, options: Mapping[str, str], receiver=None) -> "FileReader":
        path = next((str(v) for k, v in options.items() if k.lower() == "path"), None)
        if path is None:
            raise CannotReadBack("file-sink's rows are read back from its directory: set path=DIR")
        return FileReader(Path(path))

    def options(self, namespace: str) -> Mapping[str, str]:
        return {"path": str(self.root / namespace)}

    def prepare(self, namespace: str) -> None:
        (self.root / namespace).mkdir(parents=True)

    def unreachable_options(self, namespace: str) -> Mapping[str, str]:
        return {"path": str(self.root / namespace / "no-such-directory")}

    def bad_options(self) -> list[tuple[Mapping[str, str], str]]:
        return [({"path": "relative/dir"}, "path")]


class FileReader(TargetReader):
    """Every line of the committed files (``*.jsonl``; an attempt's temporary file is not one) in the directory."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def describe(self) -> str:
        return f"the rows of the files in {os.fspath(self.path)!r}"

    def prepare(self) -> None:
        held = list(self.path.glob("*.jsonl"))
        if held:
            raise CannotReadBack(f"file-sink's directory {os.fspath(self.path)!r} already holds {len(held):,} files "
                                 "of rows; every file is read back: use an empty directory")

    def values(self) -> list[bytes]:
        return [line for f in sorted(self.path.glob("*.jsonl")) for line in f.read_bytes().splitlines()]
