"""grpo-ablate's config source: the choices that are not files of conf/, the sweep files as
the group `sweep` and renamed tricks' former names as `trick` choices
(grpo_ablate/config/registry.py, `packaged_choices`), on the search path of grpo-ablate's app
only. Not the ConfigStore: Hydra deep-copies the store once per group it lists, so `--help`
would copy every sweep file about 95 times. This source holds no config itself (what Hydra
copies is two strings); grpo-ablate is imported when a choice is first asked for, not when
Hydra scans its plugins, since every Hydra app in the environment scans them."""

from __future__ import annotations

from typing import Any

from hydra.core.config_search_path import ConfigSearchPath
from hydra.core.object_type import ObjectType
from hydra.plugins.config_source import ConfigLoadError, ConfigResult, ConfigSource
from hydra.plugins.search_path_plugin import SearchPathPlugin
from omegaconf import OmegaConf

SCHEME = "grpo-ablate"
GROUPS = ("sweep", "trick")
CONF_SUFFIX = "grpo_ablate/conf"  # the primary config folder of grpo-ablate's app


def _choices() -> dict[str, Any]:
    from grpo_ablate.config.registry import packaged_choices

    return packaged_choices()


class GrpoAblateConfigSource(ConfigSource):
    @staticmethod
    def scheme() -> str:
        return SCHEME

    def available(self) -> bool:
        return True

    def is_group(self, config_path: str) -> bool:
        return config_path.strip("/") in ("", *GROUPS)

    def is_config(self, config_path: str) -> bool:
        return self._normalize_file_name(config_path.strip("/")) in _choices()

    def list(self, config_path: str, results_filter: ObjectType | None) -> list[str]:
        group = config_path.strip("/")
        if group == "":
            return list(GROUPS) if results_filter in (None, ObjectType.GROUP) else []
        if group not in GROUPS or results_filter not in (None, ObjectType.CONFIG):
            return []
        return sorted(key[len(group) + 1:-len(".yaml")] for key in _choices()
                      if key.startswith(group + "/"))

    def load_config(self, config_path: str) -> ConfigResult:
        key = self._normalize_file_name(config_path.strip("/"))
        choice = _choices().get(key)
        if choice is None:
            raise ConfigLoadError(f"Config not found: {SCHEME}://{key}")
        if isinstance(choice, dict):  # a former name's node
            config, header = OmegaConf.create(choice), {"package": "_global_"}
        else:  # a sweep file: its header says its package, as a file source reads it
            text = choice.read_text(encoding="utf-8")
            config, header = OmegaConf.create(text), self._get_header_dict(text)
        return ConfigResult(config=config, path=f"{SCHEME}://{self.path}",
                            provider=self.provider, header=header)


class GrpoAblateSearchPath(SearchPathPlugin):
    """Adds the source after grpo-ablate's own conf/ (and so after any folder a user puts
    before it); any other Hydra app's search path is left as it is."""

    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        if any(e.path.rstrip("/").endswith(CONF_SUFFIX) for e in search_path.get_path()):
            search_path.append(provider="grpo-ablate", path=f"{SCHEME}://")
