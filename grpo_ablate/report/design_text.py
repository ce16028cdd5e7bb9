"""The design lines of report.md: which runs a test uses and why, which question the
prompts support and why, what the arms are, and the margin in force."""

from __future__ import annotations

SCOPES = {
    "task": "- Scope: **the task**. Seeds and held-out prompts are both sources of chance: "
            "each arm's difference has a two-way random-effects test over the seeds x prompts "
            "it shares with the baseline (crossed_t, Satterthwaite df), so a verdict holds for "
            "the task's kind of problem, not only for these prompts (`--scope prompts` for "
            "that).",
    "prompts": "- Scope: **these held-out prompts**. Seeds are the only source of chance; a "
               "verdict says what the trick does on this held-out set (`--scope task` adds "
               "the prompt-sampling component).",
    "prompts (no per-prompt outcomes)": "- Scope: **these held-out prompts**: the task scope "
               "was asked for, but the runs carry no per-prompt outcomes (records written "
               "before them, or a CSV without a `prompt` column), so seeds are the only "
               "source of chance here.",
    "prompts (no seeds shared)": "- Scope: **these held-out prompts**: the task scope was "
               "asked for and the runs carry per-prompt outcomes, but no arm shares 2 seeds "
               "with the arm it is compared with, and matched runs are crossed by seed: "
               "Welch's test on the run means, seeds the only source of chance (`--runs "
               "independent` if the runs share nothing but their numbers).",
    "prompts (no spread to split)": "- Scope: **these held-out prompts**: the task scope was "
               "asked for and the runs carry per-prompt outcomes, but no arm's difference "
               "from the baseline has a spread to split between seeds and prompts (it is the "
               "same on every one, or there are too few), so seeds are the only source of "
               "chance here.",
}


def scope_line(st: dict, design: dict | None = None) -> str:
    """The stratum's scope in force, and why the report chose it (the CSV's or the user's
    word, or the records')."""
    line = SCOPES.get(st.get("scope", "prompts"), SCOPES["prompts"])
    why = (design or {}).get("scope_reason")
    return f"{line} Why: {why}." if why else line


def runs_line(design: dict) -> str:
    """Which runs each test uses, and why the report takes them as matched or independent."""
    why = f" Why: {design['runs_reason']}." if design.get("runs_reason") else ""
    if design.get("runs") == "independent":
        return ("- Runs: **independent**. Run s of one arm shares nothing with run s of another, "
                "whatever the numbers say: Welch's t-test on every run of each arm (with "
                "per-prompt rows under the task scope, the crossed model without a seed "
                "effect); n, mean, diff and CI describe the same runs." + why)
    return ("- Runs: **matched** (seed s gives every arm the same data): the paired t on the "
            "seeds an arm and its baseline share; where some runs lost their partner, the "
            "partially overlapping samples t-test on every run (pairs and the rest); Welch's "
            "when fewer than 2 seeds are shared. Chosen from the design, not the results." + why)


def arms_line(design: dict) -> list[str]:
    if design.get("arms") != "methods":
        return []
    return [f"- Arms: **methods**, compared with the baseline; no recipe is recommended. "
            f"Why: {design.get('arms_reason', 'as asked')}."]


def margin_text(report: dict, st: dict) -> str:
    """The margin in force here: as given, or resolved from the baseline (5%, 0.2sd)."""
    here = st.get("min_effect", report["min_effect"])
    rule = report.get("min_effect_rule", "metric units")
    if rule == "metric units":
        return f"min-effect ±{here:.4g}"
    return f"min-effect ±{here:.4g} ({rule})"


