"""The installed verl's own Hydra config, read from the YAML files it ships (verl is never imported).

verl >= 0.5 ships `_generated_<name>.yaml`, the fully composed config (`print_cfg.py --cfg job`);
older releases ship one flat `<name>.yaml`. Either way the keys are verl's, not ours.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_HYDRA_MAIN = re.compile(r"@hydra\.main\(([^)]*)\)")
_KWARG = re.compile(r"(config_path|config_name)\s*=\s*[\"']([^\"']+)[\"']")


class Missing:
    """Marks a key that the config does not have (None is a real value: YAML null)."""

    def __repr__(self) -> str:
        return "<missing>"


MISSING = Missing()


@dataclass(frozen=True, kw_only=True)
class VerlConfig:
    """One composed config of the installed verl, and the config groups beside it."""

    version: str
    config_dir: Path
    config_name: str
    source: Path
    data: dict[str, Any]
    groups: frozenset[str]
    unchecked: tuple[str, ...] = ()

    def get(self, key: str) -> Any:
        """The value at a dotted key, or MISSING."""
        node: Any = self.data
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                return MISSING
            node = node[part]
        return node

    def has(self, key: str) -> bool:
        """Whether Hydra (struct mode) lets `key=value` override it without a `+`."""
        return self.get(key) is not MISSING

    def is_unchecked(self, key: str) -> bool:
        """Keys under a defaults-list package we could not compose are not judged."""
        return any(key == p or key.startswith(p + ".") for p in self.unchecked)

    def keys(self) -> Iterator[str]:
        """Every dotted key, parents included."""

        def walk(node: dict[str, Any], prefix: str) -> Iterator[str]:
            for name, value in node.items():
                key = f"{prefix}{name}"
                yield key
                if isinstance(value, dict):
                    yield from walk(value, key + ".")

        return walk(self.data, "")

    def suggest(self, key: str) -> str | None:
        """The nearest existing key (a typo, or the same leaf under another parent)."""
        keys = list(self.keys())
        close = difflib.get_close_matches(key, keys, n=1, cutoff=0.8)
        if close:
            return close[0]
        leaf = key.rsplit(".", 1)[-1]
        same_leaf = [k for k in keys if k.rsplit(".", 1)[-1] == leaf]
        return same_leaf[0] if len(same_leaf) == 1 else None


def entry_config(site: Path, module: str) -> tuple[Path, str] | None:
    """config_path and config_name of an entry module's @hydra.main, read from its source text."""
    file = site.joinpath(*module.split(".")).with_suffix(".py")
    try:
        text = file.read_text(encoding="utf-8")
    except OSError:
        return None
    m = _HYDRA_MAIN.search(text)
    if m is None:
        return None
    kwargs = dict(_KWARG.findall(m[1]))
    if "config_name" not in kwargs:
        return None
    return (file.parent / kwargs.get("config_path", ".")).resolve(), kwargs["config_name"]


def load_config(config_dir: Path, config_name: str, version: str) -> VerlConfig | None:
    """Read `_generated_<name>.yaml` if verl ships it, else `<name>.yaml`; None if neither."""
    from verl_setup.util.yamlread import YamlError, read_yaml  # noqa: PLC0415  # only the launch lint needs YAML

    name = config_name.removesuffix(".yaml")
    unchecked: list[str] = []
    for candidate in (config_dir / f"_generated_{name}.yaml", config_dir / f"{name}.yaml"):
        try:
            data = read_yaml(candidate)[0]  # bounded: a FIFO or an alias bomb is refused, not read
        except YamlError:
            continue
        if not isinstance(data, dict):
            continue
        defaults = data.pop("defaults", None)
        if isinstance(defaults, list) and not candidate.name.startswith("_generated_"):
            unchecked = _uncomposed(defaults)
        return VerlConfig(
            version=version,
            config_dir=config_dir,
            config_name=name,
            source=candidate,
            data=data,
            groups=_groups(config_dir),
            unchecked=tuple(unchecked),
        )
    return None


def _uncomposed(defaults: list[Any]) -> list[str]:
    """Packages a defaults list would fill, which this reader does not compose."""
    packages = []
    for entry in defaults:
        if isinstance(entry, dict):
            for group in entry:
                group_name, _, package = str(group).removeprefix("override ").partition("@")
                packages.append(package or group_name.replace("/", "."))
    return packages


def _groups(config_dir: Path) -> frozenset[str]:
    """Config group names (folders holding YAML), as Hydra spells them on the command line."""
    found = set()
    for yaml_file in config_dir.rglob("*.yaml"):
        rel = yaml_file.parent.relative_to(config_dir)
        if rel.parts:
            found.add("/".join(rel.parts))
    return frozenset(found)
