"""What every check may read: the options, the host facts, and shared probes run at most once."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from verl_setup.doctor.probes.env import TargetEnv, choose_python, probe_env
from verl_setup.doctor.probes.launch_command import Launch, Resolver, hydra_value, module_of, parse_launch
from verl_setup.doctor.probes.verl_config import VerlConfig, entry_config, load_config
from verl_setup.environment.verify import MANIFEST
from verl_setup.errors import BadInputError, NoCompatibleRowError
from verl_setup.host.facts import HostFacts, load_host_file
from verl_setup.matrix.load import Matrix
from verl_setup.matrix.schema import Row
from verl_setup.plan.request import Request
from verl_setup.plan.target import build_target
from verl_setup.util.bounded import BoundError, read_capped
from verl_setup.util.vocab import ROLLOUT_ENGINES

if TYPE_CHECKING:
    from verl_setup.doctor.probes.ray_probe import RayReading

DEFAULT_MODEL_GIB = 16.0  # a 7-8B model in bf16, the size verl's quickstarts download
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(k|m|g|t)?(i?b)?\s*$", re.IGNORECASE)


@dataclass(frozen=True, kw_only=True)
class Options:
    """The doctor's command line."""

    checks: tuple[str, ...] = ()
    prefix: Path | None = None
    config_prefix: Path | None = None  # the team config's `prefix` (below VIRTUAL_ENV)
    workdir: Path | None = None  # whose .venv counts (the command's working folder)
    ray_address: str | None = None
    model_size: str | None = None
    launch: tuple[str, ...] = ()
    matrix: Path | None = None
    bucket_numel: int | None = None  # collective: elements of the run's all-gather (a NumelOut)


@dataclass(frozen=True, kw_only=True)
class Context:
    """Inputs plus lazily computed probes; a check that needs none of them costs nothing."""

    options: Options
    env: Mapping[str, str]
    matrix: Matrix
    host: HostFacts | Path | None = None

    @cached_property
    def facts(self) -> HostFacts:
        """The given facts, a saved `detect --json`, or detection (only if a check asks)."""
        if isinstance(self.host, HostFacts):
            return self.host
        if isinstance(self.host, Path):
            return load_host_file(self.host)
        from verl_setup.host.detect import detect  # noqa: PLC0415  # probes only when needed

        return detect(env=dict(self.env))

    @cached_property
    def target(self) -> tuple[TargetEnv | None, str]:
        """The env a launch would run in, or why there is none."""
        chosen = choose_python(
            self.options.prefix, self.env, self.options.config_prefix, self.options.workdir
        )
        if chosen is None:
            return (
                None,
                "no Python env: no --prefix, VIRTUAL_ENV, team config prefix, ./.venv, CONDA_PREFIX "
                "or python3 on PATH",
            )
        python, source = chosen
        found = probe_env(python, source, self.env)
        if found is None:
            return None, f"{python} ({source}) did not answer within the timeout"
        return found, ""

    @cached_property
    def launch(self) -> Launch | None:
        """The command after `--`, parsed."""
        return parse_launch(self.options.launch) if self.options.launch else None

    @cached_property
    def verl_config(self) -> tuple[VerlConfig | None, str]:
        """The installed verl's config for the launch command's entry module, or why not."""
        target, why = self.target
        if target is None:
            return None, why
        if "verl" not in target.dists:
            return None, f"verl is not installed in {target.prefix} ({target.source})"
        site = Path(target.locations["verl"])
        module = module_of(self.launch) if self.launch else "verl.trainer.main_ppo"
        entry = entry_config(site, module)
        if entry is None:
            return None, f"{module} has no readable @hydra.main(config_name=...) under {site}"
        config_dir, name = entry
        if self.launch and self.launch.config_path:
            given = Path(self.launch.config_path)
            module_dir = site.joinpath(*module.split(".")).parent
            config_dir = given if given.is_absolute() else (module_dir / given).resolve()
        if self.launch and self.launch.config_name:
            name = self.launch.config_name
        config = load_config(config_dir, name, target.dists["verl"])
        if config is None:
            return None, f"no {name}.yaml in {config_dir}"
        return config, ""

    @cached_property
    def row(self) -> tuple[Row | None, str]:
        """The matrix row this env was installed from, else the row planned for this host."""
        target, _ = self.target
        unknown = ""
        if target is not None:
            recorded = recorded_row_id(Path(target.prefix))
            if recorded is not None:
                found = next((r for r in self.matrix.rows if r.id == recorded), None)
                if found is not None:
                    return found, f"recorded in {Path(target.prefix) / MANIFEST}"
                unknown = f" ({MANIFEST} names {recorded!r}, which this matrix lacks)"
        if target is not None and "verl" in target.dists:
            installed = target.dists["verl"]
            engines = [e for e in ROLLOUT_ENGINES if e in target.dists]
            for row in self.matrix.rows:
                if row.verl.version != installed:
                    continue
                name = row.engine.name
                if (name == "none" and not engines) or (
                    name in engines and target.dists[name] == row.engine.version
                ):
                    return row, f"matches the installed verl {installed} ({name}){unknown}"
        try:
            target_facts = build_target(
                Request(),
                env=self.env,
                rules=self.matrix.cuda,
                detect=lambda: self.facts,
                load_host=load_host_file,
            )
            from verl_setup.plan.select import select  # noqa: PLC0415

            plan = select(target_facts, self.matrix)
        except (NoCompatibleRowError, BadInputError) as exc:
            return None, f"no matrix row fits this host: {str(exc).splitlines()[0]}"
        return plan.row, "planned for this host (`verl-setup plan`)"

    @cached_property
    def ray(self) -> RayReading | None:
        """The Ray probe, run once for the checks that need it (None: no address to probe)."""
        from verl_setup.doctor.probes.ray_probe import probe_ray  # noqa: PLC0415

        return probe_ray(self.options.ray_address, self.env, self.target[0])

    def launch_int(self, key: str, verl_default: int) -> int | None:
        """An integer setting of the launch: its override, else the installed verl's default."""
        if self.launch is None:
            return None
        config, _ = self.verl_config
        if config is not None:
            value, _ = Resolver(self.launch, config, self.env).integer(key)
            return value
        given = self.launch.override(key)
        value = hydra_value(given.value) if given and given.value is not None else verl_default
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    @cached_property
    def model_size_gib(self) -> tuple[float, str]:
        """The space a model download needs, from --model-size or the default."""
        text = self.options.model_size
        if text is None:
            return DEFAULT_MODEL_GIB, f"default {DEFAULT_MODEL_GIB:g} GiB (a 7-8B model in bf16)"
        m = _SIZE.match(text)
        if m is None:
            raise BadInputError(f"bad --model-size {text!r}: expected a size such as 16GB or 500MiB")
        scale = {"k": 2**-20, "m": 2**-10, "g": 1.0, "t": 1024.0}[(m[2] or "g").lower()]
        return float(m[1]) * scale, f"flag --model-size {text}"


def recorded_row_id(prefix: Path) -> str | None:
    """The row id `verl-setup install` recorded in the env's manifest, if there is a readable one."""
    try:
        data = json.loads(read_capped(prefix / MANIFEST, 1 << 20, "manifest"))
    except (BoundError, ValueError):
        return None
    row = data.get("row") if isinstance(data, dict) else None
    row_id = row.get("id") if isinstance(row, dict) else None
    return row_id if isinstance(row_id, str) else None
