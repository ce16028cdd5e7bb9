"""Records: atomic, checksummed, strict JSON; corrupt ones are detected, not trusted."""

import json
import math

import pytest

from grpo_ablate.store import (
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
