"""A small reader of W&B offline run files (`run-<id>.wandb`), for tests: wandb 0.31 has no
Python reader of its own any more. The file is a LevelDB-style log of protobuf `Record`s
(wandb/proto/wandb_internal.proto): a 7-byte header (':W&B', magic, version), then 32 KiB
blocks of chunks, each with a 7-byte header (crc32, length, type: full/first/middle/last).
Pinned to the wandb version tests/test_training_wandb.py checks.

`run.finish()` returns before W&B's writer has flushed the file: measured here under load, a
file read at return held 4096 bytes and 18928 two seconds later. `read_run` therefore waits
for the run's `exit` record, the last one W&B writes."""

from __future__ import annotations

import json
import struct
import time
from collections.abc import Iterator
from pathlib import Path

BLOCK, HEADER = 32768, 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def raw_records(data: bytes, path: Path) -> Iterator[bytes]:
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
        if pos + HEADER + length > len(data):
            return  # a record W&B is still writing
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


def read_run(path: Path, wait_s: float = 60.0) -> dict:
    """{'run': RunRecord, 'config': {...}, 'history': [{...}], 'summary': {...},
    'files': [...], 'exit': bool} from one offline run file, once it holds the exit record
    (or as it is after wait_s)."""
    deadline = time.monotonic() + wait_s
    while True:
        out = _parse(path)
        if out["exit"] or time.monotonic() > deadline:
            return out
        time.sleep(0.2)


def _parse(path: Path) -> dict:
    from wandb.proto import wandb_internal_pb2 as pb

    out: dict = {"run": None, "config": {}, "history": [], "summary": {}, "files": [],
                 "exit": False}
    data = Path(path).read_bytes()
    if len(data) < HEADER:  # W&B has not written the header yet
        return out
    for blob in raw_records(data, path):
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
        elif kind == "exit":
            out["exit"] = True
    return out
