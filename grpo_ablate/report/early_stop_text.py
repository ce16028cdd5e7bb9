"""The report's section on an early-stop sweep: its declared looks, where each arm stopped
and why, and the run-steps it saved against running every run to its end."""

from __future__ import annotations


def _g(x) -> str:
    return "-" if x is None else f"{x:.2g}"


def early_stop_lines(st: dict) -> list[str]:
    ad = st["adaptive"]
    d, used = ad["design"], ad["early_stop"]
    rule = ("each run's final value as its learning curve so far predicts it (only where "
            "every seed's curve shows its ceiling)" if d["rule"] == "extrapolated"
            else "each run's value at the look")
    lines = ["", "## Runs that stopped early", "",
             f"Declared before the first run: looks at {', '.join(f'{f:g}' for f in d['looks'])} "
             f"of each run's steps, then the end, on {d['seeds']} matched seeds; at a look an "
             f"arm is compared with the baseline on {rule}, paired; alpha {d['alpha']} spent "
             f"over the looks and the end (O'Brien-Fleming type) with Holm across the "
             f"{len(d['arms'])} arms; only a significant difference stops an arm's runs early "
             f"(no effect, within ±{d['min_effect']}, is decided at the end only). The "
             "verdicts above are the looks' decisions.", "",
             "| look | of the steps | alpha spent (at alpha/arms) | boundary z | boundary p |",
             "|---|---|---|---|---|"]
    lines += [f"| {r['look']} | {r['fraction']:g} | {r['alpha_spent_this_look']:.2g} "
              f"| {r['z_boundary']:.3f} | {r['p_boundary']:.2g} |" for r in ad["plan"]]
    lines += ["", "| arm | p at each look it was open at | stopped at | why | p at that look "
              "| boundary p | verdict |", "|---|---|---|---|---|---|---|"]
    for x in sorted(st["arms"], key=lambda x: ((x.get("adaptive") or {}).get("look") or 99,
                                                x["arm"])):
        a = x.get("adaptive")
        if not a:
            continue
        at = used["stopped_at"].get(x["arm"])
        where = "-" if a["look"] is None else "the end" if at == 1.0 else f"{at:g} of its steps"
        seen = used.get("p_at_looks", {}).get(x["arm"], [])
        lines.append(f"| {x['arm']} | {', '.join(_g(p) for p in seen) or '-'} | {where} "
                     f"| {a['reason']} | {_g(a.get('p_value'))} "
                     f"| {_g(a.get('p_boundary'))} | {x['verdict']} |")
    lines += ["", "(p at each look: the paired test of that look, last the end's; `-`: no "
              "test there, a curve that could not be read yet or no spread between seeds.)"]
    pending = f"; look {ad['pending_look']} still running" if ad["pending_look"] else ""
    lines += ["", f"Run-steps: {used['run_steps_used']:.0%} of running every run to its end "
              f"({used['steps_saved']:.0%} saved; the baseline's runs went to "
              + ("their end" if used["baseline_at"] == 1.0 else
                 f"{used['baseline_at']:g} of their steps") + f"){pending}. A stopped run keeps its "
              "checkpoint: `early_stop.extend=true` on the same command trains it to its end."]
    return lines
