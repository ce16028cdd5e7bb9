"""The share of a finished sweep's run wall time spent in held-out evaluations, from its
records (`cost.eval_seconds` / `wall_seconds`). The target: at most 5% of a demo
run's wall time. Prints `eval_share=` (all runs' evaluation seconds over all runs' wall),
`eval_share_median=` (per run), and the same for the runs that evaluate once at the start
(from the cache), at the middle and at the end with one policy at the eval temperature, so
the figure can be read against what each kind of run evaluates:
- the first run of each seed computes the start-of-run evaluation (the others reuse it);
- an EMA arm evaluates its averaged and its raw weights;
- a temperature arm also samples at its own temperature at the end.

Usage: python scripts/eval_share.py outputs/demo"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from grpo_ablate.records import scan_records


def shares(records: list) -> tuple[float, float]:
    total = sum(r.cost["eval_seconds"] for r in records) / sum(r.wall_seconds for r in records)
    return total, statistics.median(r.cost["eval_seconds"] / r.wall_seconds for r in records)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("sweep_dir", type=Path)
    ns = ap.parse_args()
    records, _ = scan_records(ns.sweep_dir)
    records = [r for r in records if r.status == "completed" and r.wall_seconds]
    if not records:
        raise SystemExit(f"{ns.sweep_dir}: no completed runs")
    total, median = shares(records)
    plain = [r for r in records
             if any(n.startswith("start-of-run evaluation reused") for n in r.notes or [])
             and not r.config["hooks"].get("ema")
             and r.config["trainer"]["temperature"] == r.config["eval"]["temperature"]]
    print(f"runs={len(records)} wall_seconds={sum(r.wall_seconds for r in records):.1f} "
          f"eval_seconds={sum(r.cost['eval_seconds'] for r in records):.1f}")
    print(f"eval_share={total:.3f}")
    print(f"eval_share_median={median:.3f}")
    if plain:
        p_total, p_median = shares(plain)
        print(f"eval_share_plain={p_total:.3f} (median {p_median:.3f}; {len(plain)} runs with the "
              "start-of-run evaluation reused, no EMA, trained at the eval temperature)")


if __name__ == "__main__":
    main()
