"""The run cache shared across sweeps: a second sweep reuses the first one's baseline (no
training, records pointing at the cache), refuses corrupt or foreign entries, and a report
over both folders combines them only when their recipes agree."""

import json
import shutil
from types import SimpleNamespace

import pytest

from grpo_ablate import cli
from grpo_ablate.config import specs_for
from grpo_ablate.records import read_record, write_record
from grpo_ablate.training.train import train_one

pytestmark = pytest.mark.slow
SHORT = ["sweep=smoke", "trainer.max_steps=2", "eval.every_steps=0"]


def sweep(capfd, out, name, tricks, *extra) -> SimpleNamespace:
    """The sweep in this process (the cache is files on disk, whichever process reads them),
    its output read from the file descriptors."""
    capfd.readouterr()
    code = cli.main(["sweep", *SHORT, f"trick={tricks}", f"sweep_name={name}", f"out_root={out}",
                     *extra])
    return SimpleNamespace(returncode=code, stderr=capfd.readouterr().err)


def records(folder):
    return {r.arm + str(r.seed): r for r in map(read_record, folder.glob("runs/*/record.json"))}


def test_second_sweep_reuses_the_baseline_from_the_cache(tmp_path, tiny_policy, capfd):
    first = sweep(capfd, tmp_path, "a", "baseline,kl_off")
    assert first.returncode == 0, first.stderr[-2000:]
    # A damaged and a foreign entry: each of those runs is trained again, not reused.
    a = records(tmp_path / "a")
    # Entries are kept per machine (numeric identity): a hit is what training here would give.
    cache = tmp_path / ".run-cache" / a["baseline0"].machine["numeric_id"]
    damaged = cache / a["baseline1"].run_id / "record.json"
    damaged.write_text(damaged.read_text().replace('"completed"', '"completed" '))
    damaged.write_text(damaged.read_text()[:-40])
    second = sweep(capfd, tmp_path, "b", "baseline,reward_clamp_task")
    assert second.returncode == 0, second.stderr[-2000:]
    trained = [ln for ln in second.stderr.splitlines() if ln.startswith("training ")]
    assert sorted(t.split()[1] + t.split()[2] for t in trained) == \
        ["arm=baselineseed=1", "arm=reward_clamp_taskseed=0", "arm=reward_clamp_taskseed=1"]
    assert "1 reused from the run cache" in second.stderr
    b = records(tmp_path / "b")
    reused = b["baseline0"]
    assert reused.origin == str((cache / reused.run_id).resolve())
    assert reused.metrics == a["baseline0"].metrics and reused.sweep == "b"
    assert b["baseline1"].origin is None and b["reward_clamp_task0"].origin is None
    # A foreign entry (a record filed under another run's id) is refused.
    shutil.rmtree(cache / a["kl_off0"].run_id)
    shutil.copytree(cache / a["baseline0"].run_id, cache / a["kl_off0"].run_id)
    third = sweep(capfd, tmp_path, "c", "kl_off", "seed=0", "+against")
    assert "training arm=kl_off seed=0" in third.stderr
    # Reported together: same recipe, so the folders combine.
    assert cli.main(["report", str(tmp_path / "a"), str(tmp_path / "b"), "--out",
                     str(tmp_path / "both"), "--no-figures"]) == 0
    rep = json.loads((tmp_path / "both" / "report.json").read_text())
    assert {x["arm"] for x in rep["strata"][0]["arms"]} == {"kl_off", "reward_clamp_task"}


def test_report_refuses_to_mix_recipes(tmp_path, smoke_sweep, capsys):
    # The smoke sweep (4 steps) and a baseline run of another seed trained for 3 steps.
    (spec,) = specs_for(["sweep=smoke", "trick=baseline", "seed=2", "trainer.max_steps=3",
                         f"out_root={tmp_path}", "sweep_name=b"], multirun=False)
    record, history = train_one(spec)
    write_record(spec.run_dir, record, history)
    _, smoke = smoke_sweep
    code = cli.main(["report", str(smoke / "smoke"), str(tmp_path / "b"), "--out",
                     str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert code == 2 and "the baseline runs come from 2 different recipes" in err
    assert not (tmp_path / "x").exists()
