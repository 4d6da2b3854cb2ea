"""Launch rule over the overrides' grammar: composed by the target env's own Hydra, in a child
process (about 1-3 s), so that Hydra's grammar is Hydra's, not a re-implementation: an override
such as `data.train_batch_size=[1,2` fails here as it would at launch. verl's own rules (keys,
batch sizes, engines) stay in the other launch modules, on top; a missing key is left to them (they name it
with a suggestion)."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping

from verl_setup.doctor.probes.env import TargetEnv
from verl_setup.doctor.probes.launch_command import Launch
from verl_setup.doctor.probes.verl_config import VerlConfig
from verl_setup.doctor.result import Evidence, Finding
from verl_setup.scripts import script_path
from verl_setup.util.bounded import one_line
from verl_setup.util.runner import ProgramError, run

TIMEOUT_S = 60.0


def lint_with_hydra(
    launch: Launch, config: VerlConfig, target: TargetEnv, env: Mapping[str, str], evidence: list[Evidence]
) -> list[Finding]:
    """A finding for what the target's Hydra rejects that verl's rules do not already name."""
    overrides = [o.text for o in launch.overrides]
    if not overrides:
        return []
    started = time.monotonic()
    argv = [
        target.python,
        str(script_path("hydra_compose")),
        str(config.config_dir),
        config.config_name,
        json.dumps(overrides),
    ]
    try:
        done = run(argv, timeout=TIMEOUT_S, env=env)
        answer = json.loads(done.stdout.strip().splitlines()[-1])
    except (ProgramError, ValueError, IndexError) as exc:
        evidence.append(Evidence(name="hydra", value="not composed", source=one_line(str(exc), 200)))
        return []
    seconds = time.monotonic() - started
    if answer.get("ok") is None:
        evidence.append(Evidence(name="hydra", value="not importable", source=f"{target.prefix}: {answer}"))
        return []
    evidence.append(
        Evidence(
            name="hydra",
            value=f"{answer['hydra']}: {'composed' if answer['ok'] else answer['error']} in {seconds:.1f} s",
            source=f"hydra.compose({config.config_name!r}, overrides) in {target.prefix}",
        )
    )
    if answer["ok"] or answer["message"].startswith("Could not override"):
        return []  # a key verl's config lacks: lint_keys names it, with a suggestion
    message = one_line(answer["message"].split("\nSee https://hydra.cc")[0], 300)
    return [
        Finding(
            status="fail",
            message=f"Hydra {answer['hydra']} rejects the overrides: {answer['error']}: {message}",
            remedy="quote values with brackets, commas, spaces or `$` for the shell and close every "
            "bracket: key='[a,b]'; Hydra's override grammar: hydra.cc/docs/advanced/override_grammar/basic",
        )
    ]
