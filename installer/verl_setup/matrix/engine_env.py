"""matrices/engine_env.yaml: engine variables and the engine versions that accept or reject them."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from verl_setup.util.paths import data_dir
from verl_setup.util.vocab import ROLLOUT_ENGINES
from verl_setup.util.yamlread import load_table

Verdict = Literal["accepts", "rejects", "not verified"]


@dataclass(frozen=True, kw_only=True)
class EngineVariable:
    """A variable (and, if given, one value of it) and the engine versions that take it."""

    name: str
    value: str | None = None
    engine: str
    accepts: str = ""
    rejects: str = ""
    effect: str
    remedy: str
    sources: tuple[str, ...]

    def matches(self, env_value: str) -> bool:
        """Whether a variable set to `env_value` is this entry."""
        return self.value is None or env_value.strip().upper() == self.value.upper()

    def verdict(self, version: str) -> Verdict:
        """What `version` of the engine does with it."""
        try:
            v = Version(version)
        except InvalidVersion:
            return "not verified"
        if self.rejects and v in SpecifierSet(self.rejects):
            return "rejects"
        if self.accepts and v in SpecifierSet(self.accepts):
            return "accepts"
        return "not verified"


@dataclass(frozen=True, kw_only=True)
class EngineEnvFile:
    """matrices/engine_env.yaml."""

    schema: int
    sources: dict[str, str]
    variables: tuple[EngineVariable, ...]


def engine_env_path() -> Path:
    """matrices/engine_env.yaml of this installation."""
    return data_dir("matrices") / "engine_env.yaml"


@lru_cache(maxsize=2)
def load_engine_env(path: Path | None = None) -> EngineEnvFile:
    """Load and check the table; BadInputError names the first problem."""
    return load_table(path or engine_env_path(), EngineEnvFile, _check)


def _check(facts: EngineEnvFile, file: str) -> list[str]:
    problems = []
    for i, v in enumerate(facts.variables):
        where = f"{file}: variables[{i}] ({v.name})"
        if v.engine not in ROLLOUT_ENGINES:
            problems.append(f"{where}: engine {v.engine!r} is not one of {', '.join(ROLLOUT_ENGINES)}")
        for key in ("accepts", "rejects"):
            try:
                SpecifierSet(getattr(v, key))
            except InvalidSpecifier as exc:
                problems.append(f"{where}: {key}: {exc}")
        problems += [f"{where}: unknown source {s!r}" for s in v.sources if s not in facts.sources]
    return problems
