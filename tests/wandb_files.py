"""A small reader of W&B offline run files (`run-<id>.wandb`), for tests: wandb 0.31 has no
Python reader of its own any more. The file is a LevelDB-style log of protobuf `Record`s
(wandb/proto/wandb_internal.proto): a 7-byte header (':W&B', magic, version), then 32 KiB
blocks of chunks, each with a 7-byte header (crc32, length, type: full/first/middle/last).
Pinned to the wandb version tests/test_wandb.py checks."""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from pathlib import Path

BLOCK, HEADER = 32768, 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def raw_records(path: Path) -> Iterator[bytes]:
    data = Path(path).read_bytes()
    ident, _magic, _version = struct.unpack("<4sHB", data[:HEADER])
    if ident != b":W&B":
        raise ValueError(f"{path}: not a W&B run file")
    pos, pending = HEADER, b""
    while pos + HEADER <= len(data):
        room = BLOCK - pos % BLOCK
        if room < HEADER:  # the rest of a block too short for a header is padding
            pos += room
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + HEADER])
        if kind == 0 and length == 0:
            pos += room  # zero padding to the end of the block
            continue
        chunk = data[pos + HEADER:pos + HEADER + length]
        pos += HEADER + length
        if kind == FULL:
            yield chunk
        elif kind == FIRST:
            pending = chunk
        elif kind == MIDDLE:
            pending += chunk
        elif kind == LAST:
            yield pending + chunk


def _items(items) -> dict:
    return {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in items}


def read_run(path: Path) -> dict:
    """{'run': RunRecord, 'config': {...}, 'history': [{...}], 'summary': {...},
    'files': [...]} from one offline run file."""
    from wandb.proto import wandb_internal_pb2 as pb

    out: dict = {"run": None, "config": {}, "history": [], "summary": {}, "files": []}
    for blob in raw_records(path):
        rec = pb.Record()
        rec.ParseFromString(blob)
        kind = rec.WhichOneof("record_type")
        if kind == "run":
            out["run"] = rec.run
            out["config"].update(_items(rec.run.config.update))
        elif kind == "config":
            out["config"].update(_items(rec.config.update))
        elif kind == "history":
            out["history"].append(_items(rec.history.item))
        elif kind == "summary":
            out["summary"].update(_items(rec.summary.update))
        elif kind == "files":
            out["files"] += [f.path for f in rec.files.files]
    return out
