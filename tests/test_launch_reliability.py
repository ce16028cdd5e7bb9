"""Fault injection: killed sweeps resume with nothing lost or duplicated, concurrent sweeps
never train a run twice, bad input is one line and exit 2, diverged and failed runs are
results that are counted, corrupt records are excluded with a warning."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

import pytest

from grpo_ablate import cli
from grpo_ablate.config import specs_for
from grpo_ablate.records import TIMED_COST, RunRecord, read_record, write_record
from grpo_ablate.training.train import train_one

ROOT = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
for var in ("GRPO_ABLATE_PAUSE_AT", "GRPO_ABLATE_PAUSE_MARKER"):
    ENV.pop(var, None)


def sweep_process(out: Path, *extra: str, pause: str | None = None, marker: Path | None = None,
                  log: Path | None = None) -> subprocess.Popen:
    env = dict(ENV)
    if pause:
        env.update(GRPO_ABLATE_PAUSE_AT=pause, GRPO_ABLATE_PAUSE_MARKER=str(marker))
    return subprocess.Popen(
        [sys.executable, "-m", "grpo_ablate.cli", "sweep", "sweep=smoke", f"out_root={out}", *extra],
        env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
        stderr=open(log, "w") if log else subprocess.DEVNULL)


def sweep_here(capfd, *args: str) -> tuple[int, str]:
    """`grpo-ablate sweep sweep=smoke ARGS` in this process (no interpreter start or second
    import of TRL): its exit code and what it wrote to stderr."""
    capfd.readouterr()
    with contextlib.chdir(ROOT):
        code = cli.main(["sweep", "sweep=smoke", *args])
    return code, capfd.readouterr().err


def records(sweep: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in sorted(sweep.glob("runs/*/record.json"))}


def report_json(sweep: Path) -> dict:
    data = json.loads((sweep / "report.json").read_text())
    data.pop("warnings", None)
    return data


# ---------------------------------------------------------------------------- kill and resume
@pytest.mark.slow
def test_killed_sweep_resumes_with_nothing_lost_or_duplicated(tmp_path, smoke_sweep):
    out, marker = tmp_path / "killed", tmp_path / "marker"
    sweep = out / "smoke"
    seen: dict[Path, bytes] = {}
    # Kill at the 2nd model load, the 2nd run's step 2, and while the 2nd record is written
    # (its temp file exists, not yet renamed). Each rerun is the same command.
    for pause in ("model_load:2", "mid_training:2", "record_write:2"):
        marker.unlink(missing_ok=True)
        proc = sweep_process(out, pause=pause, marker=marker)
        deadline = time.time() + 600
        while not marker.exists():
            assert proc.poll() is None, f"sweep ended before reaching {pause}"
            assert time.time() < deadline
            time.sleep(0.2)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        now = records(sweep)
        assert len(now) > len(seen), f"no run finished before the kill at {pause}"
        assert {p: now[p] for p in seen} == seen  # finished runs untouched, not re-trained
        seen = now
        if pause.startswith("record_write"):
            assert list(sweep.glob("runs/*/.record.json.*.tmp")), "kill did not hit the write"
    with contextlib.chdir(ROOT):  # the same command once more, in this process
        assert cli.main(["sweep", "sweep=smoke", f"out_root={out}"]) == 0
    done = records(sweep)
    assert len(done) == 6
    assert {p: done[p] for p in seen} == seen
    assert not [p for p in sweep.rglob("*") if p.name.endswith(".tmp")]
    for run_dir in sweep.glob("runs/*"):
        assert {p.name for p in run_dir.iterdir()} == {"record.json", "history.jsonl"}
        assert read_record(run_dir / "record.json").status == "completed"
    # The same sweep never killed (W&B logging on, which changes no result): the same report.
    _, reference = smoke_sweep
    assert report_json(sweep) == report_json(reference / "smoke")


# ---------------------------------------------------------------------------- concurrency
@pytest.mark.slow
def test_two_sweeps_on_one_folder_train_each_run_once(tmp_path, tiny_policy):
    out = tmp_path / "shared"
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    procs = [sweep_process(out, "trick=baseline,kl_off", "faults.sleep_per_step=0.3", log=log)
             for log in logs]
    assert [p.wait(timeout=900) for p in procs] == [0, 0]
    trained = [line.removeprefix("training ")
               for log in logs for line in log.read_text().splitlines() if line.startswith("training arm=")]
    assert sorted(trained) == sorted(set(trained)) and len(trained) == 4, trained
    assert len(records(out / "smoke")) == 4
    for path in records(out / "smoke"):
        read_record(path)  # whole, checksummed: no interleaved writes


# ---------------------------------------------------------------------------- bad input
def write_corrupt_sweep(folder: Path) -> Path:
    (folder / "runs" / "x").mkdir(parents=True)
    (folder / "runs" / "x" / "record.json").write_text('{"run_id": "x", "arm": ')
    return folder


def one_seed_csv(folder: Path) -> Path:
    path = folder / "one_seed.csv"
    path.write_text("arm,seed,eval/accuracy\nbaseline,0,0.5\nx,0,0.6\n")
    return path


BAD = [
    (["run", "trick=nope"], "trick=nope: no such trick"),
    (["run", "model=nope"], "model=nope: no such model"),
    (["run", "task=nope"], "task=nope: no such task"),
    (["run", "logger=nope"], "logger=nope: no such logger"),
    (["sweep", "sweep=nope"], "sweep=nope: no such sweep; allowed: " + ", ".join(
        sorted(p.stem for p in (ROOT / "grpo_ablate" / "sweeps").glob("*.yaml")))),
    (["run", "seed=-1"], "seed=-1: must be an integer >= 0"),
    (["run", "+hooks.emaa=1"], "hooks.emaa=1: unknown key; did you mean hooks.ema?"),
    (["run", "trainer.betta=0.1"], "trainer.betta=0.1: unknown key; did you mean trainer.beta?"),
    (["run", "+trainer.betta=0.1"], "trainer.betta=0.1: unknown key; did you mean trainer.beta?"),
    (["run", "trainer.beta=-0.04"], "trainer.beta=-0.04: must be a number >= 0"),
    (["run", "trainer.vllm_importance_sampling_correction=true"],
     "trainer.vllm_importance_sampling_correction=true: it corrects for vLLM's sampling and acts "
     "only with trainer.use_vllm=true; allowed here: false"),
    # Settings a checkpoint cannot resume exactly, refused while checkpoints are on (the default)
    (["run", "trick=ref_reset_200", "trainer.beta=0"], "trainer.sync_ref_model=true with "
     "trainer.beta=0: without the KL there is no reference to reset; allowed: beta > 0"),
    (["run", "trick=ref_reset_200", "model.lora={r:4,alpha:8,dropout:0.0,target_modules:all-linear}"],
     "trainer.sync_ref_model=true with model.lora: under LoRA the reference is the "
     "adapter-disabled policy"),
    (["run", "trick=loss_luspo", "trainer.importance_sampling_level=token"],
     "trainer.importance_sampling_level=token with trainer.loss_type=luspo: TRL computes that "
     "loss at one level; allowed: importance_sampling_level=sequence"),
    (["run", "trick=vllm_is_token_truncate"], "trainer.vllm_importance_sampling_correction=true: "
     "it corrects for vLLM's sampling and acts only with trainer.use_vllm=true"),
    (["run", "+trainer.save_only_model=true"], "trainer.save_only_model=true with checkpoints on"),
    (["run", "+trainer.ignore_data_skip=true", "checkpoint.every_minutes=null",
      "checkpoint.every_steps=2"], "trainer.ignore_data_skip=true with checkpoints on: a resumed "
     "run would train on other batches"),
    (["run", "recipe.micro_groups=2", "trainer.steps_per_generation=3"],
     "trainer.steps_per_generation=3 with checkpoints "
     "on: not a multiple of trainer.gradient_accumulation_steps=2"),
    (["run", "eval=3"], "eval=3: eval is a block of keys, not a value; allowed: eval.<key>"),
    (["run", "trainer=5"], "trainer=5: trainer is a block of keys, not a value"),
    (["run", "trick=group_size_4", "trainer.num_generations=1"],
     "trainer.num_generations=1: must be an integer >= 2"),
    (["run", "trainer.per_device_train_batch_size=24"],
     "=24: must be a multiple of trainer.num_generations=16"),
    (["run", "trainer.temperature=-1"], "trainer.temperature=-1: must be a number > 0"),
    (["run", "trainer.top_p=0"], "trainer.top_p=0: must be a number in (0, 1]"),
    (["run", "trainer.max_grad_norm=-1"], "trainer.max_grad_norm=-1: must be a number > 0, or null"),
    (["run", "trick=filter_low_reward_all", "hooks.filter_low_reward.start=-0.1"],
     "hooks.filter_low_reward.start=-0.1: must be a fraction of training in [0, 1]"),
    (["run", "trainer.learning_rate=-1e-5"], "trainer.learning_rate=-1e-05: must be a number > 0"),
    (["run", "model.path=./no/such/checkpoint"], "model.path=./no/such/checkpoint: no checkpoint there"),
    (["run", "task.data_file=./missing.jsonl"], "task.data_file=missing.jsonl: no such file"),
    (["run", "task.data_file=tests/fixtures/arith_bad.jsonl"], "line 2 is not a JSON object"),
    (["run", "checkpoint.every_steps=0"], "checkpoint.every_steps=0: must be an integer >= 1, or null"),
    (["run", "checkpoint.every_steps=-5"], "checkpoint.every_steps=-5: must be an integer >= 1"),
    (["run", "checkpoint.every_minutes=0"], "checkpoint.every_minutes=0: must be a number > 0, or null"),
    (["run", "checkpoint.every_minutes=-1"], "checkpoint.every_minutes=-1: must be a number > 0"),
    (["run", "checkpoint.keep_last=0"], "checkpoint.keep_last=0: must be an integer >= 1"),
    (["run", "checkpoint.max_overhead=0"], "checkpoint.max_overhead=0: must be a number in (0, 1]"),
    (["sweep", "sweep=smoke", "trainer.beta=0.1,-1"], "trainer.beta=-1: must be a number >= 0"),
    (["report", "CORRUPT_SWEEP"], "no valid run records under runs/*/record.json (1 corrupt)"),
    (["report", "CORRUPT_SWEEP/runs/x/record.json"], "a JSON file; allowed: a sweep folder"),
    (["report", "tests/fixtures/no_seed.csv"], "CSV lacks column(s) seed"),
    (["report", "tests/fixtures/results.csv", "--metric", "eval/acc"], "--metric eval/acc: no run has it"),
    (["report", "tests/fixtures/results.csv", "--baseline", "base"], "--baseline base: no such arm"),
    (["report", "ONE_SEED_CSV"], "1 usable run(s) for -/-; allowed: at least 2 seeds"),
    (["report", "tests/fixtures/results.csv", "--correction", "bonferroni"], "invalid choice: 'bonferroni'"),
]


@pytest.mark.parametrize("args,message", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_input_one_line_exit_2_nothing_written(tmp_path, capsys, monkeypatch, args, message):
    monkeypatch.chdir(ROOT)
    out = tmp_path / "out"
    out.mkdir()
    corrupt = write_corrupt_sweep(tmp_path / "corrupt")
    args = [a.replace("CORRUPT_SWEEP", str(corrupt)).replace("ONE_SEED_CSV", str(one_seed_csv(tmp_path)))
            for a in args]
    if args[0] in ("run", "sweep"):
        args.append(f"out_root={out}")
    else:
        args += ["--out", str(out)]
    before = sorted(p.name for p in tmp_path.rglob("*"))
    code = cli.main(args)
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2
    assert len(lines) == 1 and message in lines[0], err
    assert "Traceback" not in err
    assert not any(out.iterdir())
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


@pytest.mark.parametrize("args,message", [
    ([], "allowed: PATH [--dry-run], one sweep folder"),
    (["a", "b"], "allowed: PATH [--dry-run], one sweep folder"),
    (["NOWHERE"], "not a folder; allowed: a sweep folder"),
    (["EMPTY"], "no offline-run-* folder under it; allowed: the folder of a sweep run with "
                "logger=wandb (offline)")])
def test_wandb_sync_bad_input_is_one_line_exit_2(tmp_path, capsys, args, message):
    args = [a.replace("NOWHERE", str(tmp_path / "nowhere")).replace("EMPTY", str(tmp_path))
            for a in args]
    assert cli.main(["wandb-sync", *args, "--dry-run"]) == 2
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(lines) == 1 and message in lines[0], lines


def test_bad_input_through_a_real_process_exits_2():
    res = subprocess.run([sys.executable, "-m", "grpo_ablate.cli", "run", "trainer.top_p=2"],
                         capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=300)
    assert res.returncode == 2 and res.stderr.strip().count("\n") == 0
    assert "trainer.top_p=2: must be a number in (0, 1]" in res.stderr


# ---------------------------------------------------------------------------- divergence, failure
@pytest.mark.slow
def test_diverging_sweep_goes_on_and_report_counts_diverged_runs(tmp_path, tiny_policy, capfd):
    out = tmp_path / "out"
    code, err = sweep_here(capfd, "trick=baseline,kl_off", f"out_root={out}",
                           "faults.nan_loss_at_step=3")
    assert code == 0, err[-2000:]
    recs = [read_record(p) for p in records(out / "smoke")]
    assert len(recs) == 4 and {r.status for r in recs} == {"diverged"}
    for r in recs:
        history = [json.loads(line) for line in
                   (out / "smoke" / "runs" / r.run_id / "history.jsonl").read_text().splitlines()]
        assert max(row["step"] for row in history) == r.steps == 3
    rep = json.loads((out / "smoke" / "report.json").read_text())
    arm = rep["strata"][0]["arms"][0]
    assert arm["runs_diverged"] == 2 and arm["n"] == 2  # counted as results, not dropped
    assert len(rep["strata"][0]["failures"]) == 4
    assert "diverged" in (out / "smoke" / "report.md").read_text()


@pytest.mark.slow
def test_failing_sweep_goes_on_and_every_run_is_recorded(tmp_path, tiny_policy, capfd):
    out = tmp_path / "out"
    code, err = sweep_here(capfd, f"out_root={out}", "faults.reward_raises_at_step=1")
    assert code == 0, err[-2000:]
    recs = [read_record(p) for p in records(out / "smoke")]
    assert len(recs) == 6 and all(r.status == "failed" and "injected fault" in r.error for r in recs)
    assert "report skipped" in err


@pytest.mark.slow
def test_failed_runs_listed_not_counted_and_wandb_finished(tmp_path, tiny_policy):
    import wandb

    base = ["trainer.max_steps=3", "eval.every_steps=0", f"out_root={tmp_path}"]
    for seed in (0, 1):
        for extra in ([], ["trick=kl_off", "faults.reward_raises_at_step=1", "logger=wandb"]):
            (spec,) = specs_for([*base, f"seed={seed}", *extra], multirun=False)
            record, history = train_one(spec)
            write_record(spec.run_dir, record, history)
            if extra:
                assert record.status == "failed" and wandb.run is None  # W&B was finished
    assert len(list((tmp_path / "adhoc" / "wandb").glob("offline-run-*/run-*.wandb"))) == 2
    assert cli.main(["report", str(tmp_path / "adhoc"), "--no-figures"]) == 0
    rep = json.loads((tmp_path / "adhoc" / "report.json").read_text())
    arm = rep["strata"][0]["arms"][0]
    assert arm["arm"] == "kl_off" and arm["runs_failed"] == 2 and arm["n"] == 0
    assert arm["verdict"] == "inconclusive"
    assert [f["status"] for f in rep["strata"][0]["failures"]] == ["failed", "failed"]


# ---------------------------------------------------------------------------- corruption
def test_corrupt_record_is_reported_by_path_and_excluded(tmp_path, capsys):
    for arm, shift in (("baseline", 0.0), ("x", 0.05)):
        for seed in range(4):
            rec = RunRecord(run_id=f"{arm}{seed}", sweep="s", arm=arm, seed=seed, model="m",
                            task="t", status="completed", error=None, config={},
                            metrics={"eval/accuracy": 0.5 + shift + 0.01 * seed}, stability={},
                            diagnostics=[], steps=1, wall_seconds=0.0, cost={}, activity={}, versions={},
                            git_sha=None)
            write_record(tmp_path / "runs" / rec.run_id, rec, [])
    edited = tmp_path / "runs" / "x3" / "record.json"
    data = json.loads(edited.read_text())
    data["metrics"]["eval/accuracy"] = 0.99
    edited.write_text(json.dumps(data))
    truncated = tmp_path / "runs" / "x2" / "record.json"
    truncated.write_text(truncated.read_text()[:100])
    assert cli.main(["report", str(tmp_path), "--no-figures"]) == 0
    err = capsys.readouterr().err
    assert f"{edited}: checksum mismatch" in err and f"{truncated}: not readable JSON" in err
    rep = json.loads((tmp_path / "report.json").read_text())
    assert len(rep["warnings"]) == 2
    arm = rep["strata"][0]["arms"][0]
    # Seeds 2 and 3 excluded, and said so; the 2 left keep their baseline partners, and the
    # baseline's other runs count too (the partially overlapping samples t-test).
    assert arm["n"] == 2 and arm["test"] == "overlap_t"
    assert "2 matched seeds and 0 arm / 2 baseline runs without a partner (arm seeds [], " \
        "baseline seeds [2, 3])" in arm["notes"][0]


# ---------------------------------------------------------------------------- determinism
@pytest.mark.slow
def test_same_seed_identical_record_except_timings(tiny_policy):
    def run(seed):
        (spec,) = specs_for(["trainer.max_steps=4", "eval.every_steps=2", f"seed={seed}"], False)
        record, history = train_one(spec)
        body = asdict(record)
        for timing in ("wall_seconds", "checksum", "notes"):  # notes: the start eval's origin
            body.pop(timing)
        for timing in TIMED_COST:
            body["cost"].pop(timing, None)
        body["machine"].pop("threads")
        return body, history

    (rec_a, hist_a), (rec_b, hist_b), (_, hist_c) = run(7), run(7), run(8)
    assert rec_a == rec_b and hist_a == hist_b
    assert hist_a != hist_c
