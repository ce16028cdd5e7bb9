"""Every GRPOConfig field of the installed TRL is pinned by the baseline recipe or declared
not to change the computation (grpo_ablate/config/grpo_fields.py), so a TRL release that
adds a field or moves a default fails here instead of moving the baseline."""

import dataclasses
import importlib.metadata
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from grpo_ablate.config.grpo_fields import (
    NOT_COMPUTATION,
    PINNED,
    unclassified_fields,
    unpinned_fields,
)

ROOT = Path(__file__).resolve().parent.parent
RECIPE = yaml.safe_load((ROOT / "conf" / "recipe" / "baseline.yaml").read_text())["trainer"]


def grpo_config_field_names() -> set[str]:
    from trl import GRPOConfig

    return {f.name for f in dataclasses.fields(GRPOConfig)}


def test_every_field_of_the_installed_grpoconfig_is_classified():
    names = grpo_config_field_names()
    assert len(names) > 150  # TrainingArguments' fields included
    assert unclassified_fields(names) == []
    assert sorted((set(PINNED) | set(NOT_COMPUTATION)) - names) == []  # none stale
    assert set(PINNED) & set(NOT_COMPUTATION) == set()


def test_a_field_trl_adds_fails_the_check():
    """A copy of the table's input with a field a future TRL might add."""
    names = grpo_config_field_names() | {"advantage_estimator"}
    assert unclassified_fields(names) == ["advantage_estimator"]


def test_the_recipe_sets_every_pinned_field():
    assert unpinned_fields(RECIPE) == []
    assert unpinned_fields({k: v for k, v in RECIPE.items() if k != "use_bias_correction_kl"}) \
        == ["use_bias_correction_kl"]


def test_the_baseline_keeps_the_reviews_kl_and_the_objective_under_vllm():
    assert RECIPE["use_bias_correction_kl"] is False
    assert RECIPE["vllm_importance_sampling_correction"] is False
    assert RECIPE["loss_type"] == "grpo" and RECIPE["beta"] == 0.04


def test_the_vllm_extra_is_inside_trls_own_range():
    """pyproject's [vllm] extra admits only vLLM releases the installed TRL's own extra
    admits (read from TRL's metadata), so `pip install '.[vllm]'` cannot pick one TRL does
    not support."""
    import tomllib

    ours = [Requirement(r) for r in tomllib.loads((ROOT / "pyproject.toml").read_text())
            ["project"]["optional-dependencies"]["vllm"]]
    (ours_vllm,) = [r for r in ours if r.name == "vllm"]
    theirs = [Requirement(r) for r in importlib.metadata.requires("trl") or []
              if r.startswith("vllm")]
    trl_range = SpecifierSet(",".join(str(r.specifier) for r in theirs if r.name == "vllm"))
    assert str(trl_range), "TRL no longer declares a vllm range: read its extra again"
    assert_inside(ours_vllm.specifier, trl_range)


def assert_inside(ours: SpecifierSet, theirs: SpecifierSet) -> None:
    """Every release ours admits (probed over a grid of versions) theirs admits too."""
    probes = [f"0.{minor}.{patch}" for minor in range(0, 60) for patch in range(0, 4)]
    outside = [v for v in probes if ours.contains(v) and not theirs.contains(v)]
    assert outside == [], f"ours ({ours}) admits {outside[:3]}... outside TRL's ({theirs})"
    assert any(ours.contains(v) for v in probes)


def test_the_range_check_catches_a_wider_extra():
    import pytest

    with pytest.raises(AssertionError):
        assert_inside(SpecifierSet(">=0.10"), SpecifierSet(">=0.22.0,<=0.31.0"))
