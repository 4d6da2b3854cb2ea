"""The launch command after `--`: which entry module, which config, which Hydra overrides.

`PYTHONUNBUFFERED=1 python3 -m verl.trainer.main_ppo data.train_batch_size=256 +x.y=1 ~z`, or the
same after `ray job submit ... --`. Values are typed the way Hydra types them (int, float, bool,
null, string), and a key's effective value is the last override, else the config's default with
its `${...}` interpolations followed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from verl_setup.doctor.probes.verl_config import MISSING, VerlConfig

DEFAULT_MODULE = "verl.trainer.main_ppo"
_ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_PYTHON = re.compile(r"(^|/)python(\d(\.\d+)?)?$")
_OVERRIDE = re.compile(r"^(\+\+|\+|~)?([A-Za-z_][\w.@/-]*)(?:=(.*))?$", re.DOTALL)
_INTERPOLATION = re.compile(r"^\$\{([^{}]*)\}$")
# Launchers that start one process per GPU themselves; torch's own as a program or as a module.
LAUNCHERS = ("torchrun", "deepspeed")
LAUNCHER_MODULES = ("torch.distributed.run", "torch.distributed.launch")


@dataclass(frozen=True, kw_only=True)
class Override:
    """One Hydra override: `key=value`, `+key=value` (add), `++key=value` (force), `~key` (delete)."""

    prefix: str
    key: str
    value: str | None
    text: str


@dataclass(frozen=True, kw_only=True)
class Launch:
    """A parsed launch command."""

    argv: tuple[str, ...]
    program: str | None
    launcher: str | None  # torchrun (or torch.distributed.run) in front of the entry module
    module: str | None
    config_path: str | None
    config_name: str | None
    overrides: tuple[Override, ...]

    def override(self, key: str) -> Override | None:
        """The last override of `key` (Hydra applies them in order)."""
        found = [o for o in self.overrides if o.key == key and o.prefix != "~"]
        return found[-1] if found else None


def parse_launch(argv: Sequence[str]) -> Launch:
    """Split a launch command into program, entry module, config flags and overrides."""
    args = list(argv)
    if "--" in args:  # `ray job submit --address ... -- python3 -m ...`
        args = args[args.index("--") + 1 :]
    while args and _ENV_ASSIGNMENT.match(args[0]):
        args.pop(0)
    program = module = config_path = config_name = launcher = None
    overrides: list[Override] = []
    if args and args[0].rsplit("/", 1)[-1] in LAUNCHERS:
        launcher = args.pop(0).rsplit("/", 1)[-1]
    if args and _PYTHON.search(args[0]):
        program = args.pop(0)
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "-m" and i + 1 < len(args) and module is None:
            module, i = args[i + 1], i + 2
            if module in LAUNCHER_MODULES and launcher is None:
                launcher, module = module, None  # `python -m torch.distributed.run ... -m verl...`
            continue
        flag, eq, inline = arg.partition("=")
        if flag in ("--config-path", "-cp", "--config-name", "-cn"):
            value = inline if eq else (args[i + 1] if i + 1 < len(args) else "")
            i += 1 if eq else 2
            if flag in ("--config-path", "-cp"):
                config_path = value
            else:
                config_name = value
            continue
        m = _OVERRIDE.match(arg)
        if m and (m[3] is not None or m[1] == "~"):
            overrides.append(Override(prefix=m[1] or "", key=m[2], value=m[3], text=arg))
        elif module is None and program is not None and arg.endswith(".py"):
            module = arg.removesuffix(".py").replace("/", ".").lstrip(".")
        i += 1
    return Launch(
        argv=tuple(argv),
        program=program,
        launcher=launcher,
        module=module,
        config_path=config_path,
        config_name=config_name,
        overrides=tuple(overrides),
    )


def hydra_value(text: str) -> Any:
    """Type a command-line value the way Hydra's grammar does for scalars."""
    stripped = text.strip()
    lowered = stripped.lower()
    if lowered in ("null", "~"):
        return None
    if lowered in ("true", "false"):
        return lowered == "true"
    for convert in (int, float):
        try:
            return convert(stripped)
        except ValueError:
            pass
    if len(stripped) >= 2 and stripped[0] == stripped[-1] and stripped[0] in "'\"":
        return stripped[1:-1]
    return stripped


@dataclass(frozen=True)
class Resolver:
    """Effective values: launch overrides over the installed config's defaults."""

    launch: Launch
    config: VerlConfig
    env: Mapping[str, str]

    def value(self, key: str, depth: int = 0) -> tuple[Any, str]:
        """(value, where it came from); MISSING if neither the command nor the config has it."""
        given = self.launch.override(key)
        if given is not None and given.value is not None:
            return self._follow(hydra_value(given.value), depth), f"launch command {given.text}"
        default = self.config.get(key)
        if default is MISSING:
            return MISSING, "not in the config"
        return self._follow(default, depth), f"verl {self.config.version} default ({self.config.source.name})"

    def _follow(self, value: Any, depth: int) -> Any:
        if not isinstance(value, str) or depth > 8:
            return value
        m = _INTERPOLATION.match(value.strip())
        if m is None:
            return value
        inner = m[1]
        if inner.startswith("oc.select:"):
            key, _, fallback = inner.removeprefix("oc.select:").partition(",")
            found, _ = self.value(key.strip(), depth + 1)
            return hydra_value(fallback) if found is MISSING or found is None else found
        if inner.startswith("oc.env:"):
            name, _, fallback = inner.removeprefix("oc.env:").partition(",")
            return hydra_value(self.env.get(name.strip(), fallback))
        if re.fullmatch(r"[\w.]+", inner):
            found, _ = self.value(inner, depth + 1)
            return found
        return MISSING  # a resolver we do not evaluate: the rule that needs it is skipped

    def integer(self, key: str) -> tuple[int | None, str]:
        """An integer setting (None when unset, not a number or not evaluable)."""
        value, source = self.value(key)
        ok = isinstance(value, int) and not isinstance(value, bool)
        return (value if ok else None), source


def module_of(launch: Launch) -> str:
    """The entry module, verl's PPO trainer when the command names none."""
    return launch.module or DEFAULT_MODULE
