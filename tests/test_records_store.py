"""Records: atomic, checksummed, strict JSON; corrupt ones are detected, not trusted."""

import json
import math

import pytest

from grpo_ablate.records import (
    CorruptRecord,
    RunRecord,
    read_history,
    read_record,
    record_exists,
    run_lock,
    scan_records,
    write_record,
)


def make_record(arm="baseline", seed=0, acc=0.5, status="completed"):
    return RunRecord(run_id=f"{arm}{seed}", sweep="t", arm=arm, seed=seed, model="tiny",
                     task="arithmetic", status=status, error=None, config={"seed": seed},
                     metrics={"eval/accuracy": acc, "eval/sampled_accuracy": math.nan},
                     stability={"kl_max": None}, diagnostics=[], steps=3, wall_seconds=1.0,
                     cost={"completions": 10}, activity={}, versions={"trl": "x"}, git_sha=None)


def test_write_read_roundtrip(tmp_path):
    run_dir = tmp_path / "runs" / "r1"
    write_record(run_dir, make_record(), [{"step": 1, "loss": math.inf}])
    rec = read_record(run_dir / "record.json")
    assert rec.metrics["eval/accuracy"] == 0.5
    assert rec.metrics["eval/sampled_accuracy"] is None  # NaN stored as null: strict JSON
    assert read_history(run_dir) == [{"step": 1, "loss": None}]
    assert not list(run_dir.glob(".*tmp"))


@pytest.mark.parametrize("damage", ["truncate", "edit", "drop_field", "bad_status"])
def test_corrupt_records_are_detected(tmp_path, damage):
    run_dir = tmp_path / "runs" / "r1"
    path = write_record(run_dir, make_record(), [])
    text = path.read_text()
    if damage == "truncate":
        path.write_text(text[: len(text) // 2])
    else:
        data = json.loads(text)
        if damage == "edit":
            data["metrics"]["eval/accuracy"] = 0.99
        elif damage == "drop_field":
            del data["stability"]
        else:
            data["status"] = "great"
        path.write_text(json.dumps(data))
    with pytest.raises(CorruptRecord, match=str(path)):
        read_record(path)
    assert not record_exists(run_dir)
    write_record(tmp_path / "runs" / "ok", make_record(seed=1), [])
    records, problems = scan_records(tmp_path)
    assert [r.seed for r in records] == [1] and len(problems) == 1


def test_run_lock_is_exclusive(tmp_path):
    with run_lock(tmp_path, "abc") as first:
        assert first
        with run_lock(tmp_path, "abc") as second:
            assert not second
    with run_lock(tmp_path, "abc") as again:
        assert again


def test_run_cache_serves_only_entries_computed_on_this_machine(tmp_path, caplog):
    """Entries are keyed by run identity and machine: one that says it was computed on
    another machine (numeric identity) is refused, so a hit is what training here gives."""
    from dataclasses import replace

    from grpo_ablate.config import specs_for
    from grpo_ablate.launch import run_cache
    from grpo_ablate.runtime import machine
    from grpo_ablate.training.outcome import make_record

    (spec,) = specs_for([f"out_root={tmp_path}"], multirun=False)
    here = machine("cpu", threads=2)
    record = make_record(spec, "completed", None, 1.0, metrics={"eval/accuracy": 0.5}, where=here)
    run_cache.store(spec, record, [])
    entry = tmp_path / ".run-cache" / here["numeric_id"] / spec.run_id
    assert (entry / "record.json").is_file()
    found = run_cache.lookup(spec)
    assert found is not None and found[0].metrics == {"eval/accuracy": 0.5}
    write_record(entry, replace(record, machine={**here, "numeric_id": "0123456789ab"}), [],
                 pause=None)
    assert run_cache.lookup(spec) is None
    assert "was computed on another machine" in caplog.text


def test_records_written_before_the_machine_field_still_read(tmp_path):
    import hashlib
    from dataclasses import asdict

    from grpo_ablate.records import jsonable

    body = {k: v for k, v in jsonable(asdict(make_record())).items()
            if k not in ("machine", "notes", "checksum")}
    body["checksum"] = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
    path = tmp_path / "record.json"
    path.write_text(json.dumps(body))
    record = read_record(path)
    assert record.machine is None and record.notes == []
    body["surprise"] = 1
    path.write_text(json.dumps(body))
    with pytest.raises(CorruptRecord, match="fields missing or extra"):
        read_record(path)


def test_a_report_over_runs_of_two_machines_says_so(tmp_path):
    from dataclasses import replace

    from grpo_ablate.results.table import load_results, machines_note

    m1 = {"cpu": "AMD EPYC", "cpu_flags": ["avx2"], "device": "cpu", "numeric_id": "aaaaaaaaaaaa"}
    m2 = {"cpu": "Intel Xeon", "cpu_flags": ["avx2", "avx512_bf16"], "device": "cpu",
          "numeric_id": "bbbbbbbbbbbb"}
    for seed in range(2):
        for arm, where in (("baseline", m1), ("x", m2 if seed else m1)):
            rec = replace(make_record(arm, seed), machine=where)
            write_record(tmp_path / "runs" / rec.run_id, rec, [])
    df, _ = load_results(tmp_path)
    note = machines_note(df)
    assert note.startswith("the runs were computed on 2 machines")
    assert "3 runs on AMD EPYC (avx2), cpu [aaaaaaaaaaaa]" in note
    assert "1 runs on Intel Xeon (avx2, avx512_bf16), cpu [bbbbbbbbbbbb]" in note
    assert machines_note(df[df["machine_id"] == "aaaaaaaaaaaa"]) is None
