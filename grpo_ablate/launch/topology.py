"""The two ablation topologies beside one trick at a time, each arm a combined trick
(config/combination.py) written into the sweep folder's `conf/trick/`, so it composes,
caches, resumes and launches as an arm:

- `sweep=leave_one_out recipe=PATH|TRICK|[A,B,C]` (ScaleRL, arXiv 2510.13786): the recipe
  (`loo_full`, against the baseline) and the recipe minus each of its tricks (`loo_minus_<t>`,
  against `loo_full`), over matched seeds: the report tests each removal against the full
  recipe. The recipe is a finished sweep's recommended one (PATH), a combined trick file's
  `composed_of`, or a list.
- `sweep=add_one base=TRICK|[A,B] tricks=[X,Y,...]` (Tricks or Traps, arXiv 2508.08221, Lite
  PPO): the base (against the baseline) and the base plus each trick (`<base>__plus__<t>`,
  against the base): the report tests each addition against the base."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from grpo_ablate.config import override_key, specs_for
from grpo_ablate.config.combination import Combination, combine, trick_settings
from grpo_ablate.errors import UserError
from grpo_ablate.records import atomic_write_text

TOPOLOGIES = ("leave_one_out", "add_one")
ADD_ONE_TRICKS = ("kl_off", "entropy_coef_0.01", "overlong_soft", "zero_variance_filter",
                  "adv_clip_2", "top_p_1.0")  # add_one's default additions
OWN_KEYS = ("recipe", "base", "tricks")


def _names(value: str) -> list[str]:
    return [n.strip().strip("'\"") for n in value.strip().strip("[]").split(",") if n.strip()]


def _given(overrides: list[str], key: str) -> str | None:
    found = [o.split("=", 1)[1] for o in overrides if override_key(o) == key]
    return found[-1] if found else None


def recipe_tricks(value: str, config_dirs: list[str] | None) -> list[str]:
    """The tricks of `recipe=`: a finished sweep folder's recommended recipe, a combined trick
    file's `composed_of`, or a list of tricks."""
    path = Path(value).expanduser()
    if path.is_dir():
        from grpo_ablate.report.recipe import read_report, recipe_name, recipe_of

        return list(recipe_of(read_report(path.resolve()), recipe_name(path.resolve()),
                              config_dirs).tricks)
    names = _names(value)
    if len(names) == 1:
        meta, _ = trick_settings(names[0], config_dirs)
        names = list(meta.get("composed_of") or names)
    return names


def topology_arms(topology: str, overrides: list[str],
                  config_dirs: list[str] | None) -> list[Combination]:
    """The combined tricks of a leave-one-out or add-one sweep, in launch order; refusals in
    one line (exit 2) before anything is written."""
    return (_leave_one_out if topology == "leave_one_out" else _add_one)(overrides, config_dirs)


def _leave_one_out(overrides: list[str], config_dirs: list[str] | None) -> list[Combination]:
    value = _given(overrides, "recipe")
    if value is None or value == "baseline":
        raise UserError("sweep=leave_one_out: recipe= names the recipe to remove tricks from; "
                        "allowed: a finished sweep folder, a combined trick file, or a list "
                        "of at least 2 tricks, e.g. recipe=[kl_off,grad_norm_off,"
                        "zero_variance_filter]")
    tricks = recipe_tricks(value, config_dirs)
    if len(set(tricks)) < 2 or "baseline" in tricks:
        raise UserError(f"sweep=leave_one_out recipe={value}: {len(set(tricks))} trick(s); "
                        "allowed: a recipe of at least 2 different tricks (with one, the "
                        "removal is the baseline: a one-at-a-time sweep)")
    full = _combined("loo_full", tricks, config_dirs, None,
                     f"leave-one-out: the full recipe {' + '.join(tricks)}")
    out = [full]
    for t in full.tricks:
        rest = [x for x in full.tricks if x != t]
        out.append(_combined(f"loo_minus_{t}", rest, config_dirs, "loo_full",
                             f"leave-one-out: the recipe without {t}"))
    return out


def _add_one(overrides: list[str], config_dirs: list[str] | None) -> list[Combination]:
    base_value = _given(overrides, "base") or "lite_ppo"
    base = _names(base_value)
    additions = _names(_given(overrides, "tricks") or ",".join(ADD_ONE_TRICKS))
    if not base or "baseline" in base:
        raise UserError(f"sweep=add_one base={base_value}: allowed: a trick or a list of tricks "
                        "(with base=baseline, add_one is the one-at-a-time sweep)")
    clash = [t for t in additions if t in base or t == "baseline"]
    if clash or not additions:
        raise UserError(f"sweep=add_one tricks={','.join(additions) or 'none'}: "
                        f"{', '.join(clash) or 'nothing to add'}; allowed: tricks not in the base")
    name = base[0] if len(base) == 1 else "add_one_base"
    out = [] if len(base) == 1 else [_combined(name, base, config_dirs, None,
                                               f"add-one: the base {' + '.join(base)}")]
    for t in additions:
        out.append(_combined(f"{name}__plus__{t}", [*base, t], config_dirs, name,
                             f"add-one: the base {' + '.join(base)} plus {t}"))
    return out


def _combined(name: str, tricks: list[str], config_dirs: list[str] | None,
              against: str | None, topology: str) -> Combination:
    combined = combine(name, tricks, config_dirs)
    if combined.passed_over:
        arm, kept, _ = combined.passed_over[0]
        raise UserError(f"{name}: {arm} and {kept} are arms of one family "
                        f"({combined.families[kept]}): they cannot be applied together; "
                        "allowed: tricks of different families")
    return replace(combined, against=against, topology=topology,
                   changes=topology.split(": ", 1)[1])


def topology_sweep(overrides: list[str], search: list[str], config_dirs: list[str] | None,
                   into: Path | None = None) -> tuple[list[str], Path | None]:
    """The overrides with a topology's arms, and the config dir holding their trick files
    (None: the line asks for no topology). `into`: where to write them instead (`plan`)."""
    topology = next((t for t in TOPOLOGIES if f"sweep={t}" in overrides), None)
    if topology is None:
        stray = [o for o in overrides if override_key(o) in ("base", "tricks")]
        if stray:
            raise UserError(f"{stray[0]}: only for sweep=add_one; allowed: sweep=add_one "
                            "base=TRICK tricks=[A,B]")
        return overrides, None
    if any(override_key(o) == "trick" for o in overrides):
        raise UserError(f"sweep={topology}: the sweep chooses its arms; allowed: recipe=/base=/"
                        "tricks=, not trick=")
    arms = topology_arms(topology, overrides, config_dirs)
    rest = [o for o in overrides if override_key(o) not in OWN_KEYS]
    probe = [o for o in rest if override_key(o) != "seed"]
    (spec,) = specs_for([*search, *probe, "trick=baseline", "seed=0"], multirun=True)
    config_dir = (into or Path(spec.sweep_dir).resolve()) / "conf"
    for arm in arms:
        path = config_dir / "trick" / f"{arm.name}.yaml"
        text = arm.trick_yaml(f"{arm.topology} (grpo-ablate sweep sweep={topology}).")
        if not path.is_file() or path.read_text() != text:
            atomic_write_text(path, text)
    names = ["baseline", *dict.fromkeys(
        [a.against for a in arms if a.against and a.against not in {x.name for x in arms}]
        + [a.name for a in arms])]
    return [*rest, f"trick={','.join(names)}"], config_dir
