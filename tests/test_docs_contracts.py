"""docs/contracts.md against the code: every field of a run record and every key a report.json
holds are written there, and no file of the repository points outside it for a contract."""

import dataclasses
import json
import re
from pathlib import Path

from grpo_ablate import cli
from grpo_ablate.records import RunRecord

ROOT = Path(__file__).resolve().parents[1]
DOC = (ROOT / "docs" / "contracts.md").read_text()


def _section(title: str) -> str:
    start = DOC.index(f"## {title}")
    end = DOC.find("\n## ", start + 1)
    return DOC[start:end if end > 0 else None]


def test_every_record_field_is_in_the_contract():
    named = set(re.findall(r"`([a-z_]+)`", _section("Run record")))
    fields = {f.name for f in dataclasses.fields(RunRecord)}
    assert fields - named == set()


def test_every_report_json_key_is_in_the_contract(tmp_path):
    csv = ROOT / "tests" / "fixtures" / "results.csv"
    assert cli.main(["report", str(csv), "--out", str(tmp_path), "--no-figures"]) == 0
    report = json.loads((tmp_path / "report.json").read_text())
    block = _section("report.json")
    named = set(re.findall(r'"([a-z_]+)"', block)) | set(re.findall(r"`([a-z_]+)`", block))
    keys = set(report) | {k for st in report["strata"] for k in st} | \
        {k for st in report["strata"] for a in st["arms"] for k in a} | \
        {k for st in report["strata"] for k in st["baseline"]}
    assert keys - named == set()


def test_nothing_points_outside_the_repository():
    pointers = []
    for path in [*ROOT.glob("*.md"), *ROOT.glob("docs/*.md"), *ROOT.glob("grpo_ablate/**/*.py"),
                 *ROOT.glob("grpo_ablate/conf/**/*.yaml"), *ROOT.glob("scripts/*")]:
        if path.is_file() and re.search(r"\bshared" + "/(DESIGN|seed|notes)", path.read_text()):
            pointers.append(str(path.relative_to(ROOT)))
    assert pointers == []
