"""lm-evaluation-harness results per checkpoint as learning curves: a manifest with a `step`
column names each checkpoint's samples folder (path, arm, seed, step). The samples files are
written in the harness's own format (one JSON object per document: doc_id, filter, metrics
and each metric's value; tests/test_results_lm_eval.py runs the real harness to write them);
each document's outcome is drawn from a curve planted from ScaleRL's form (tests/scalerl.py).
A run's final numbers are its last checkpoint's; its curve is its checkpoints' means."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scalerl import scalerl

from grpo_ablate import cli

STEPS = np.arange(0, 44, 4)
DOCS = 400


def write_checkpoints(root, arms: dict[str, float], seeds: int = 3) -> tuple[pd.DataFrame, dict]:
    """Each (arm, seed, step): a samples file under root/<arm>/s<seed>/step<step>/; returns
    the manifest rows and each checkpoint's accuracy over its documents."""
    rng = np.random.default_rng(11)
    rows, accuracy = [], {}
    for arm, ceiling in arms.items():
        for seed in range(seeds):
            curve = scalerl(STEPS.astype(float), 0.3, ceiling + rng.normal(0, 0.01), 2.0, 8.0)
            for step, p in zip(STEPS, curve, strict=True):
                folder = root / arm / f"s{seed}" / f"step{step}" / "model"
                folder.mkdir(parents=True)
                acc = (rng.random(DOCS) < p).astype(float)
                (folder / "samples_sums_2026-12-07T00-00-00.jsonl").write_text("".join(
                    json.dumps({"doc_id": d, "filter": "none", "metrics": ["acc"],
                                "acc": float(a)}) + "\n" for d, a in enumerate(acc)))
                rows.append({"path": str(folder.parent.relative_to(root)), "arm": arm,
                             "seed": seed, "step": int(step)})
                accuracy[arm, seed, int(step)] = float(acc.mean())
    return pd.DataFrame(rows), accuracy


def test_checkpoints_named_by_a_manifest_give_each_run_its_curve(tmp_path, capsys):
    manifest, accuracy = write_checkpoints(tmp_path, {"baseline": 0.6, "high": 0.8})
    manifest.to_csv(tmp_path / "runs.csv", index=False)
    out = tmp_path / "report"
    assert cli.main(["report", "--from", "lm-eval", str(tmp_path), "--manifest",
                     str(tmp_path / "runs.csv"), "--metric", "acc,none", "--out", str(out),
                     "--no-figures"]) == 0
    capsys.readouterr()
    rep = json.loads((out / "report.json").read_text())
    (st,) = rep["strata"]
    (arm,) = st["arms"]
    last = int(STEPS[-1])
    assert arm["mean"] == pytest.approx(np.mean([accuracy["high", s, last] for s in range(3)]))
    curves = rep["curves"]
    assert curves["unit"] == "steps" and len(curves["runs"]) == 6
    starts = {(r["arm"], r["seed"]): r["start"] for r in curves["runs"]}
    assert starts["high", 1] == pytest.approx(accuracy["high", 1, 0])
    (row,) = curves["strata"][0]["arms"]
    band = row["band"]
    assert band["steps"] == [int(s) for s in STEPS[1:]]
    at = band["steps"].index(last)
    assert band["diff"][at] == pytest.approx(arm["mean"] - st["baseline"]["mean"])
    assert row["ceiling"]["test"] == "welch_t"  # the harness's runs are independent
    assert row["words"].startswith("raises the ceiling")


def test_a_manifest_step_that_is_not_an_integer_is_refused_in_one_line(tmp_path, capsys):
    manifest, _ = write_checkpoints(tmp_path, {"baseline": 0.6, "high": 0.8}, seeds=2)
    manifest = manifest.astype({"step": object})
    manifest.loc[3, "step"] = "late"
    manifest.to_csv(tmp_path / "runs.csv", index=False)
    code = cli.main(["report", "--from", "lm-eval", str(tmp_path), "--manifest",
                     str(tmp_path / "runs.csv"), "--metric", "acc,none",
                     "--out", str(tmp_path / "report")])
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert code == 2 and len(err) == 1 and "row 5 needs an integer step" in err[0], err
    assert not (tmp_path / "report").exists()


@pytest.mark.parametrize("layout", [
    # lm_eval --model_args pretrained=ckpts/<arm>-seed<s>/checkpoint-<K> --output_path evals:
    # the harness names its folder after the model's path, each "/" written "__".
    "ckpts__{arm}-seed{seed}__checkpoint-{step}",
    "{arm}-seed{seed}/global_step_{step}/model",  # verl's checkpoint folders
])
def test_checkpoints_named_by_their_folders_give_the_manifests_report(tmp_path, capsys, layout):
    manifest, _ = write_checkpoints(tmp_path / "by-manifest", {"baseline": 0.6, "high": 0.8})
    manifest.to_csv(tmp_path / "by-manifest" / "runs.csv", index=False)
    named = tmp_path / "evals"
    for row in manifest.itertuples():
        arm = row.arm
        src = next((tmp_path / "by-manifest" / row.path).rglob("samples_*.jsonl"))
        dest = named / layout.format(arm=arm, seed=row.seed, step=row.step) / src.name
        dest.parent.mkdir(parents=True)
        dest.write_bytes(src.read_bytes())
    reports = {}
    for name, args in (("manifest", [str(tmp_path / "by-manifest"), "--manifest",
                                      str(tmp_path / "by-manifest" / "runs.csv")]),
                       ("names", [str(named)])):
        assert cli.main(["report", "--from", "lm-eval", *args, "--metric", "acc,none",
                         "--out", str(tmp_path / name), "--no-figures"]) == 0
        reports[name] = json.loads((tmp_path / name / "report.json").read_text())
    capsys.readouterr()
    (a,), (b,) = (r["strata"][0]["arms"] for r in reports.values())
    assert (b["arm"], b["n"], b["mean"], b["diff"], b["p_value"]) == \
        ("high", a["n"], a["mean"], a["diff"], a["p_value"])
    curves = [r["curves"]["strata"][0]["arms"][0] for r in reports.values()]
    assert curves[0]["band"] == curves[1]["band"] and curves[0]["words"] == curves[1]["words"]


def test_run_folders_with_and_without_checkpoint_steps_are_refused_in_one_line(tmp_path,
                                                                              capsys):
    for name in ("kl_off-seed0/checkpoint-4", "kl_off-seed1"):
        (tmp_path / name).mkdir(parents=True)
        (tmp_path / name / "samples_sums_2026-12-07T00-00-00.jsonl").write_text(json.dumps(
            {"doc_id": 0, "filter": "none", "metrics": ["acc"], "acc": 1.0}) + "\n")
    assert cli.main(["report", "--from", "lm-eval", str(tmp_path), "--metric", "acc,none",
                     "--no-figures", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "names no checkpoint step, and others do" in err[0], err
