"""A content-addressed store of finished runs, shared across sweeps:
`<run_cache>/<machine numeric_id>/<run_id>/` holds a run's record and history, keyed by the
hash of everything that changes its computation (config.run_id) and by the machine that
computed it. A sweep that needs a run the cache holds copies it instead of training it, and
the copy's record says where it came from (`origin`).

Why the machine is part of the key: the same config and seed give bitwise the same record on
one machine, whatever the launcher, but another CPU model or a GPU gives other numbers. A
cache hit must be what training here would have given, so a sweep's records never depend on
which machine filled a shared cache (docs/determinism.md).

Entries are checked like records (schema, checksum); an entry whose config does not hash to
its key, that was computed on another machine, or that is not a finished run is refused
and the run is trained."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path

from grpo_ablate.config import RunSpec, run_id
from grpo_ablate.records import (
    RECORD_NAME,
    CorruptRecord,
    RunRecord,
    clean_partials,
    read_history,
    read_record,
    write_record,
)
from grpo_ablate.runtime import numeric_id

log = logging.getLogger(__name__)


def cache_dir(spec: RunSpec, machine_id: str | None = None) -> Path | None:
    where = spec.config.get("run_cache")
    if not where:
        return None
    machine_id = machine_id or numeric_id(spec.config["trainer"]["use_cpu"])
    return Path(where) / machine_id / spec.run_id


def store(spec: RunSpec, record: RunRecord, history: list[dict]) -> None:
    """Keep a finished run (completed or diverged, trained here) for other sweeps."""
    machine_id = (record.machine or {}).get("numeric_id")
    entry = cache_dir(spec, machine_id) if machine_id else None
    if entry is None or record.status == "failed" or record.origin is not None:
        return
    try:
        clean_partials(entry)  # a writer killed earlier may have left a temp file
        write_record(entry, replace(record), history, pause=None)  # the kill tests aim at runs/
    except OSError as exc:  # a full or read-only cache never fails the run
        log.warning("run cache not written (%s)", exc)


def lookup(spec: RunSpec) -> tuple[RunRecord, list[dict], Path] | None:
    """The cached run for this spec on this machine, if the cache holds a valid one."""
    entry = cache_dir(spec)
    if entry is None or not (entry / RECORD_NAME).is_file():
        return None
    try:
        record = read_record(entry / RECORD_NAME)
    except CorruptRecord as exc:
        log.warning("run cache entry refused: %s", exc)
        return None
    if record.status == "failed" or record.run_id != spec.run_id or \
            run_id(record.config) != spec.run_id:
        log.warning("run cache entry refused: %s is not run %s", entry, spec.run_id)
        return None
    if (record.machine or {}).get("numeric_id") != entry.parent.name:
        log.warning("run cache entry refused: %s was computed on another machine", entry)
        return None
    return record, read_history(entry), entry


def adopt(spec: RunSpec) -> bool:
    """Copy a cached run into this sweep's folder, as this sweep's record. True if done."""
    found = lookup(spec)
    if found is None:
        return False
    record, history, entry = found
    mine = replace(record, sweep=spec.config["sweep_name"], arm=spec.arm, config=spec.config,
                   origin=str(entry.resolve()))
    write_record(spec.run_dir, mine, history)
    return True
