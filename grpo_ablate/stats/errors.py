"""What the statistics stage raises when the results cannot answer what was asked: a
ValueError that names the setting (metric, baseline), its value and what is allowed. The
report turns it into the command line's one-line message (`--baseline x: ...`)."""

from __future__ import annotations


class SettingError(ValueError):
    def __init__(self, setting: str, value: object, problem: str) -> None:
        self.setting, self.value, self.problem = setting, value, problem
        super().__init__(f"{setting} {value}: {problem}")


class ResultsError(ValueError):
    """Results that cannot be analysed together, whatever the settings."""
