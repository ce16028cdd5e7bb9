"""Two reports of one sweep's arms side by side: does the second (e.g. with early stopping,
or adaptive) decide what the first (every run to its end, fixed n) decides? Reads each
folder's report.json (`grpo-ablate report` wrote it) and prints, per arm either decides on,
both verdicts, then

  decided_full=N decided_early=M same_decided=K disagree=ARMS run_steps_saved=X runs=A,B

where a verdict is decided when it is improves, harms, negligible or no_effect; same_decided
counts the arms the first decides that the second decides alike; a disagreement is an arm
both decide differently, or one decides and the other leaves open (named with both verdicts);
run_steps_saved is the second report's share of run-steps not trained (its early-stop
section; `-` where it has none); runs each report's run count.

    python scripts/compare_sweeps.py FULL_SWEEP_DIR EARLY_SWEEP_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

DECIDED = ("improves", "harms", "negligible", "no_effect")


def verdicts(folder: Path) -> tuple[dict[str, str], dict]:
    rep = json.loads((folder / "report.json").read_text())
    out, extra = {}, {"runs": 0, "saved": None}
    for st in rep["strata"]:
        for arm in st["arms"]:
            out[(st["model"], st["task"], arm["arm"])] = arm["verdict"]
        extra["runs"] += st["baseline"]["n"] + sum(a["n"] for a in st["arms"])
        stop = (st.get("adaptive") or {}).get("early_stop")
        if stop:
            extra["saved"] = stop["steps_saved"]
    return out, extra


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[-1].strip())
    (full, a), (early, b) = (verdicts(Path(p)) for p in sys.argv[1:])
    disagree = []
    for key in sorted(set(full) | set(early)):
        f, e = full.get(key, "-"), early.get(key, "-")
        if f in DECIDED or e in DECIDED:
            print(f"{key[2]}: {f} | {e}")
            if f != e:
                disagree.append(f"{key[2]}({f}|{e})")
    same = sum(full[k] in DECIDED and early.get(k) == full[k] for k in full)
    saved = "-" if b["saved"] is None else f"{b['saved']:.3f}"
    print(f"decided_full={sum(v in DECIDED for v in full.values())} "
          f"decided_early={sum(v in DECIDED for v in early.values())} same_decided={same} "
          f"disagree={','.join(disagree) or 'none'} run_steps_saved={saved} "
          f"runs={a['runs']},{b['runs']}")


if __name__ == "__main__":
    main()
