"""The near-null control's reading: an arm whose trick file says `control: near_null` (RLOO
under group-std scaling, GRPO's advantage times G/(G-1)) is expected to come out no_effect or
negligible. Its verdict is a live check of the false-positive rate on the user's own task:
one control called improves or harms says the sweep's other verdicts deserve a second look."""

from __future__ import annotations

EXPECTED = ("no_effect", "negligible")


def control_reading(arm: str, verdict: str) -> str:
    """One line on a near-null control's verdict."""
    if verdict in EXPECTED:
        return (f"- {arm}: {verdict.replace('_', ' ')}, as a near-null arm should: no sign "
                "that this sweep calls effects that are not there")
    if verdict in ("improves", "harms"):
        return (f"- {arm}: **{verdict}**, where a near-null arm should not: either a false "
                "positive (at alpha 0.05 about 1 in 20 such controls), or the task's "
                "optimizer does not absorb the gradient's scale; read the other verdicts with "
                "this in mind, and rerun with more seeds")
    return (f"- {arm}: {verdict}: the sweep cannot yet say no effect even for a near-null arm, "
            "so its other no-effect verdicts need as many seeds as this one would")


def control_lines(st: dict, controls: dict[str, str]) -> list[str]:
    """The report's "Near-null control" lines for the stratum's control arms (none: [])."""
    rows = [control_reading(x["arm"], x["verdict"]) for x in st["arms"] if x["arm"] in controls]
    if not rows:
        return []
    return ["", "### Near-null control", "",
            "An arm expected to do (almost) nothing: its verdict checks the false-positive "
            "rate on this task (docs/verdicts.md, \"Near-null control\").", "", *rows]


def arm_controls(df) -> dict[str, str]:
    """Each control arm's kind (its trick file's `control`), from the records."""
    if "control" not in df.columns:
        return {}
    rows = df.dropna(subset=["control"]).drop_duplicates("arm")
    return dict(zip(rows["arm"], rows["control"], strict=True))


def arm_duplicates(arms: list[str]) -> dict[str, dict]:
    """The arms whose fidelity card declares them a duplicate of another arm (config/fidelity):
    {arm: {arm, where, term}}, read from the trick files of the catalog."""
    from grpo_ablate.config.catalog import load_catalog

    cards = {t["id"]: (t.get("fidelity") or {}).get("duplicate_of") for t in load_catalog()}
    return {a: dict(cards[a]) for a in arms if cards.get(a)}


def duplicate_lines(st: dict, duplicates: dict[str, dict]) -> list[str]:
    """The report's "Declared duplicates" lines for the stratum's arms (none: [])."""
    rows = []
    for x in st["arms"]:
        dup = duplicates.get(x["arm"])
        if dup:
            term = "its policy term is" if dup.get("term") == "policy" else "it computes"
            rows.append(f"- {x['arm']}: {term} {dup['arm']}'s gradient up to a positive scale "
                        f"({dup['where']}): its verdict, {x['verdict'].replace('_', ' ')}, is about "
                        f"that sameness, not a second method")
    if not rows:
        return []
    return ["", "### Declared duplicates", "",
            "Arms whose fidelity card says they compute another arm's gradient on this kind of "
            "baseline (`grpo-ablate tricks --fidelity`, docs/tricks.md).", "", *rows]
