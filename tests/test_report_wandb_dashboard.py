"""The W&B dashboard of a sweep: the report spec written offline beside report.json, checked
against wandb-workspaces' own models, round-tripped, and read against the offline run files
the sweep wrote (no panel may plot a key no run logged).

No W&B server exists here: nothing is saved to one. `--wandb-publish` is run without network
and must print one warning line, exit 0 and leave the spec as it was. The private names of
wandb-workspaces the module uses are checked first, so a release that moves them fails here.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from wandb_files import read_run

from grpo_ablate.report import wandb_dashboard as dash

STUB_REPORT = {
    "metric": "eval/accuracy", "direction": "higher", "baseline": "baseline", "alpha": 0.05,
    "correction": "holm", "min_effect": 0.01, "inert_below": 0.05,
    "strata": [{"model": "tiny", "task": "arithmetic", "arms": [
        {"arm": "no_kl", "n": 3, "verdict": "inconclusive",
         "waiting_on": {"on": "effect", "text": "waiting on confirmation: +4 seeds"}},
        {"arm": "ema", "n": 5, "verdict": "harms", "waiting_on": None}]}],
}


def test_the_private_wandb_workspaces_names_used_are_there():
    import wandb_workspaces.reports.v2 as wr
    import wandb_workspaces.workspaces as ws
    from wandb_workspaces.reports.v2 import internal as report_internal
    from wandb_workspaces.workspaces import internal as workspace_internal

    for cls in (wr.Report, ws.Workspace):
        assert callable(cls._to_model) and callable(cls._from_model)
    assert hasattr(report_internal.ReportViewspec, "model_validate_json")
    assert hasattr(workspace_internal.View, "model_validate_json")


def _panels(spec: dict) -> list[dict]:
    return [p for b in spec["spec"]["blocks"] if b["type"] == "panel-grid"
            for p in b["metadata"]["panelBankSectionConfig"]["panels"]]


def test_a_built_report_plots_only_logged_keys_and_lists_open_arms():
    runs = dash.SweepRuns(group="demo", project="p", entity="", run_ids=("r1", "r2"),
                          strata=(("tiny", "arithmetic"),),
                          logged=frozenset({"eval/accuracy", "train/kl"}))
    spec = json.loads(dash.view_spec(dash.dashboard_report(STUB_REPORT, runs, "summary-x",
                                                         ["forest.png"])))
    keys = {k for p in _panels(spec) for k in p["config"].get("metrics", [])}
    assert keys == {"eval/accuracy", "train/kl"}  # entropy, length, grad norm: not logged
    text = json.dumps(spec)
    assert "waiting on confirmation: +4 seeds" in text and "ema:" not in text
    assert "summary-x" in text and "r1, r2" in text
    none_logged = dash.SweepRuns(group="demo", project="p", entity="")
    spec = json.loads(dash.view_spec(dash.dashboard_report(STUB_REPORT, none_logged, None, [])))
    assert [p["viewType"] for p in _panels(spec)] == ["Weave"]  # the verdict table alone


@pytest.mark.slow
def test_sweep_writes_a_report_spec_that_validates_and_matches_its_run_files(smoke_sweep):
    from wandb_workspaces.reports.v2 import internal

    _res, out = smoke_sweep
    sweep = out / "smoke"
    text = (sweep / dash.SPEC_FILE).read_text()
    model = internal.ReportViewspec.model_validate_json(text)  # wandb-workspaces' own model
    assert dash.view_spec(dash.report_from_spec(text)) == text.strip()  # round-trips
    spec = json.loads(text)
    assert spec["displayName"] == f"grpo-ablate: {sweep.name}" and model.id == ""
    grids = [b for b in spec["spec"]["blocks"] if b["type"] == "panel-grid"]
    runsets = [r for g in grids for r in g["metadata"]["runSets"]]
    assert any(r["grouping"] == [{"section": "run", "name": "jobType"}] for r in runsets)
    panels = _panels(spec)
    lines = [p for p in panels if p["viewType"] == "Run History Line Plot"]
    assert lines and all(p["config"]["groupAgg"] == "mean" and p["config"]["groupArea"] == "stderr"
                         and p["config"]["xAxis"] == "train/global_step" for p in lines)
    assert any(p["viewType"] == "Bar Chart" for p in panels)
    assert any("verdicts" in json.dumps(p) for p in panels if p["viewType"] == "Weave")
    assert any(p["config"].get("mediaKeys") == ["figures/forest"] for p in panels)
    plotted = {k for p in panels for k in p["config"].get("metrics", [])}
    assert {"eval/accuracy", "train/kl", "train/entropy", "train/grad_norm"} <= plotted

    logged: set[str] = set()
    for path in sorted(sweep.glob("wandb/offline-run-*/run-*.wandb")):
        run = read_run(path)
        if run["run"].job_type == "summary":
            continue
        logged |= set().union(*run["history"])
    assert plotted <= logged, plotted - logged  # no panel plots a key no run logged
    workspace = json.loads((sweep / dash.WORKSPACE_FILE).read_text())
    assert workspace["displayName"] == f"grpo-ablate: {sweep.name}"


@pytest.mark.slow
def test_publish_without_network_warns_once_and_leaves_the_spec(smoke_sweep, tmp_path):
    _res, out = smoke_sweep
    sweep = out / "smoke"
    before = (sweep / dash.SPEC_FILE).read_bytes()
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "WANDB_SILENT": "true",
           "WANDB_API_KEY": "x" * 40, "WANDB_BASE_URL": "http://127.0.0.1:9",
           "WANDB_ENTITY": "someone"}
    res = subprocess.run([sys.executable, "-m", "grpo_ablate.cli", "report", str(sweep),
                          "--wandb-publish"], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    warnings = [ln for ln in res.stderr.splitlines() if "not published" in ln]
    assert len(warnings) == 1 and "unchanged" in warnings[0], res.stderr[-2000:]
    assert (sweep / dash.SPEC_FILE).read_bytes() == before
    assert Path(sweep / "report.json").is_file()


@pytest.mark.slow
def test_a_rerun_of_the_report_keeps_the_published_report_id(tmp_path):
    from grpo_ablate import cli

    csv = Path(__file__).parent / "fixtures" / "results.csv"
    args = ["report", str(csv), "--out", str(tmp_path), "--wandb", "offline"]
    assert cli.main(args) == 0
    spec_path = tmp_path / dash.SPEC_FILE
    spec = json.loads(spec_path.read_text())
    assert spec["id"] == ""  # never published
    spec["id"] = "published-id"  # what --wandb-publish writes back after a save
    spec_path.write_text(json.dumps(spec))
    assert cli.main(args) == 0
    again = json.loads(spec_path.read_text())
    assert again["id"] == "published-id" and again["displayName"] == "grpo-ablate: results"
