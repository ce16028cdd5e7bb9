"""Placeholder replaced by the statistics stage."""
import sys
from grpo_ablate.store import scan_records
def main(args):
    recs, probs = scan_records(args[0])
    by = {}
    for r in recs:
        by.setdefault(r.arm, []).append(r.metrics.get("eval/accuracy", float("nan")))
    import statistics
    for arm, v in sorted(by.items()):
        print(f"{arm:28s} n={len(v)} acc={statistics.mean(v):.3f} ± {statistics.stdev(v) if len(v)>1 else 0:.3f}")
    return 0
