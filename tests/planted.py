"""Planted rewards for the tests whose premise is a batch's rewards: what a trick must act on
is put there, not left to what the tiny policy, SFT-trained on the machine that runs the
tests, happens to generate (another CPU trains another policy: docs/tests.md)."""


def planted_groups(g: int) -> list[float]:
    """4 groups of g: all right; none right (partial credit 0.2); one right and the rest at
    0.3; half right, half malformed (-1). Uniform groups and varied ones, rewards above and
    below any clip or filter a test sets in (-1, 1)."""
    return [1.0] * g + [0.2] * g + [1.0] + [0.3] * (g - 1) + [1.0, -1.0] * (g // 2)


def planted(plan: list[float]) -> str:
    """The override that replaces the task's rewards with `plan`, cycled over each call's
    completions (conf/faults: `planted_rewards`)."""
    return f"faults.planted_rewards=[{','.join(repr(float(v)) for v in plan)}]"
