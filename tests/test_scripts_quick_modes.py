"""Every script in scripts/ runs in the suite. Each has a quick mode (tiny sizes, a few steps,
or a small sweep as its input) that these tests run in the project's venv; a run must exit 0
and print every `name=value` figure line that docs/figures.md cites for its script. The GPU
check is rehearsed on the CPU, every step, with its figures checked against docs/gpu.md's
table. A refactor that breaks a script then fails `make test`, not the first GPU run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "scripts"
SMOKE = "<the smoke sweep's folder>"  # filled in from the smoke_sweep fixture
# Each script's quick command line (after `python scripts/NAME`).
QUICK = {
    "bench_checkpoint.py": ["--quick"],
    "bench_cli.py": ["--quick"],
    "bench_lora.py": ["--quick"],
    "bench_parallel.py": ["--quick"],
    "bench_policy_build.py": ["--quick"],
    "bench_real.py": ["--quick"],
    "bench_sandbox.py": ["--quick"],
    "bench_stats.py": ["--quick"],
    "check_adaptive.py": ["--quick"],
    "check_adaptive_screening.py": ["--quick"],
    "check_calibration.py": ["--quick"],
    "check_curves.py": ["--quick"],
    "check_duplicates.py": ["--quick"],
    "check_early_stop.py": ["--quick"],
    "compare_sweeps.py": [SMOKE, SMOKE],
    "check_error_rule.py": ["--quick"],
    "check_published.py": ["--quick"],
    "check_independent.py": ["--quick"],
    "check_plan.py": ["--quick"],
    "check_screening.py": ["--quick"],
    "eval_share.py": [SMOKE],
    "draw_wandb_report.py": [f"{SMOKE}/wandb_report.json", "{tmp}/report.png"],
    "make_task_fixtures.py": ["--quick"],
}
# Scripts another part of `make test` runs, and where.
ELSEWHERE = {
    "gpu_check.sh": "test_the_gpu_check_rehearses_every_step_on_the_cpu (below)",
    "gpu_check.py": "the GPU check's rehearsal (below): its scale, sweep and refusals steps",
    "bench_overhead.py": "the GPU check's rehearsal (below): its overhead step, whose figures "
                         "are checked against docs/figures.md there",
    "gpu_wheels.sh": "tests/test_scripts_gpu_check.py (downloads the wheelhouse, then --dry-run)",
    "gen_reference.py": "tests/test_docs_files.py runs its --check (the generated docs are current)",
    "slurm_local.sh": "the Makefile's test target, before pytest (the slurm tests use it)",
}
FIGURE = re.compile(r"`([a-z][a-z0-9_]*(?:\[[^\]`]*\])?)=")


def cited_figures(doc: Path) -> dict[str, set[str]]:
    """script name -> the `name=` figures docs/figures.md's table rows cite for it. A row
    whose command cell says "same" repeats the row above's command."""
    cited: dict[str, set[str]] = {}
    script = None
    for line in doc.read_text().splitlines():
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) < 3:
            continue
        named = re.search(r"scripts/([a-z_]+\.(?:py|sh))", cells[1])
        if named:
            script = named.group(1)
        elif not cells[1].startswith("same"):
            script = None
        if script:
            cited.setdefault(script, set()).update(FIGURE.findall(" ".join(cells[2:])))
    return cited


def test_every_script_has_a_quick_mode_in_the_suite():
    on_disk = {p.name for p in SCRIPTS.iterdir() if p.suffix in (".py", ".sh")}
    assert on_disk == set(QUICK) | set(ELSEWHERE), "a script without a quick run in the suite"


def test_the_cited_figures_are_read_from_the_docs(tmp_path):
    """The parser sees a figure, follows "same" rows, and a planted row for a script."""
    cited = cited_figures(ROOT / "docs" / "figures.md")
    assert "trainer_overhead_ratio" in cited["bench_overhead.py"]
    assert "overhead_ratio" in cited["bench_overhead.py"]  # a "same" row
    assert set(cited) <= set(QUICK) | set(ELSEWHERE)
    doc = tmp_path / "figures.md"
    doc.write_text("| what | command | figure | machine |\n|---|---|---|---|\n"
                   "| x | `python scripts/bench_sandbox.py` | `planted_name=3` | AMD |\n"
                   "| y | same | `second=1`, `_s10=2` | AMD |\n| z | other | `third=1` | AMD |\n")
    assert cited_figures(doc) == {"bench_sandbox.py": {"planted_name", "second"}}


def run_script(name: str, args: list[str], env: dict | None = None, timeout: float = 600):
    command = [sys.executable, str(SCRIPTS / name)] if name.endswith(".py") \
        else ["bash", str(SCRIPTS / name)]
    return subprocess.run([*command, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout,
                          env={**os.environ, "WANDB_MODE": "offline", **(env or {})})


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(QUICK))
def test_a_scripts_quick_mode_prints_the_figures_the_docs_cite(name, smoke_sweep, tmp_path):
    _, out = smoke_sweep
    args = [a.replace(SMOKE, str(out / "smoke")).replace("{tmp}", str(tmp_path))
            for a in QUICK[name]]
    res = run_script(name, args)
    assert res.returncode == 0, f"{name} {' '.join(args)}:\n{res.stdout[-2000:]}\n{res.stderr[-3000:]}"
    printed = set(FIGURE.findall("".join(f"`{line}" for line in res.stdout.splitlines())))
    missing = cited_figures(ROOT / "docs" / "figures.md").get(name, set()) - printed
    assert not missing, f"{name} no longer prints {sorted(missing)}:\n{res.stdout[-2000:]}"


def gpu_md_figures() -> list[str]:
    """The figure names docs/gpu.md's step table lists (`accelerate_*=` as a prefix)."""
    rows = [line for line in (ROOT / "docs" / "gpu.md").read_text().splitlines()
            if re.match(r"\| \d ", line)]
    return [m for row in rows for m in re.findall(r"`([a-z0-9_*]+)=`", row.split("|")[3])]


@pytest.mark.slow
def test_the_gpu_check_rehearses_every_step_on_the_cpu(tiny_policy, tmp_path):
    res = run_script("gpu_check.sh", ["--rehearse"],
                     env={"OUT": str(tmp_path / "out"), "GPU_CHECK_ROOT": str(tmp_path)})
    assert res.returncode == 0, res.stdout[-3000:] + (tmp_path / "out" / "gpu_check.log"
                                                      ).read_text()[-3000:]
    figures = (tmp_path / "out" / "gpu_check.txt").read_text()
    steps = re.findall(r"^step_([a-z_]+)=ok in", figures, re.M)
    assert steps == ["install", "gpu_tests", "overhead", "scale", "sweep", "refusals"]
    assert re.search(r"^gpu_tests=.*skipped", figures, re.M)  # CUDA's tests, named as skipped
    assert "gpu_peak_memory_gib=skipped" in figures
    names = gpu_md_figures() + sorted(cited_figures(ROOT / "docs" / "figures.md")
                                      ["bench_overhead.py"])
    assert len(names) >= 15
    absent = [n for n in names
              if not re.search("^" + re.escape(n).replace(r"\*", "[a-z0-9_]+") + "=", figures, re.M)]
    assert absent == [], figures
