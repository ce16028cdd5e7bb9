"""`grpo-ablate sweep sweep=pair pair=[A,B]`: the 2x2 factorial of two tricks (the baseline,
A, B and A+B over matched seeds), for the pairs the review says interact (temperature with
group size). A+B is a combined trick (config/combination.py) written into the sweep folder's
`conf/trick/` and put on the search path; the report's "Do the tricks add up?" gives the
interaction, (AB - base) - (A - base) - (B - base), with its interval."""

from __future__ import annotations

from pathlib import Path

from grpo_ablate.config import override_key, specs_for
from grpo_ablate.config.combination import combine
from grpo_ablate.errors import UserError
from grpo_ablate.records import atomic_write_text

PAIR_KEY = "pair"


def pair_sweep(overrides: list[str], search: list[str], into: Path | None = None,
               ) -> tuple[list[str], Path | None]:
    """The overrides with the pair's four arms, and the config dir holding its combined trick
    file (None: no pair asked for). `into`: the folder to write it in instead of the
    sweep's (`plan`)."""
    given = [o for o in overrides if override_key(o) == PAIR_KEY]
    if not given:
        if "sweep=pair" in overrides:
            raise UserError("sweep=pair: pair=[A,B] names the two tricks; allowed: two tricks "
                            "of `grpo-ablate tricks` of different families, e.g. "
                            "pair=[temperature_1.2,group_size_8]")
        return overrides, None
    value = given[-1].split("=", 1)[1].strip()
    names = [n.strip().strip("'\"") for n in value.strip("[]").split(",") if n.strip()]
    if len(names) != 2 or len(set(names)) != 2 or "baseline" in names:
        raise UserError(f"pair={value}: allowed: two different tricks, e.g. "
                        "pair=[temperature_1.2,group_size_8]")
    name = f"pair_{names[0]}__{names[1]}"
    combined = combine(name, names)
    if combined.passed_over:
        raise UserError(f"pair={value}: {names[0]} and {names[1]} are arms of one family "
                        f"({combined.families[names[0]]}): they cannot be applied together; "
                        "allowed: two tricks of different families")
    rest = [o for o in overrides if override_key(o) not in (PAIR_KEY, "trick")]
    probe = [o for o in rest if override_key(o) != "seed"]
    (spec,) = specs_for([*search, *probe, "trick=baseline", "seed=0"], multirun=True)
    config_dir = (into or Path(spec.sweep_dir).resolve()) / "conf"
    path = config_dir / "trick" / f"{name}.yaml"
    text = combined.trick_yaml(f"The combination of {names[0]} and {names[1]} "
                               "(grpo-ablate sweep sweep=pair).")
    if not path.is_file() or path.read_text() != text:
        atomic_write_text(path, text)
    return [*rest, f"trick=baseline,{names[0]},{names[1]},{name}"], config_dir
