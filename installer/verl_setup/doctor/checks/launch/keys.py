"""Launch rules over the override keys: Hydra's struct mode (a new key needs `+`, `+` on a key that
exists fails, `~` needs a key to delete), with a hint for the keys blog posts give that verl never had."""

from __future__ import annotations

from verl_setup.doctor.probes.launch_command import Launch
from verl_setup.doctor.probes.verl_config import VerlConfig
from verl_setup.doctor.result import Finding

# Keys users copy from blog posts that verl never had, with what does the job instead.
KNOWN_NON_KEYS = {
    "trainer.ray_address": "verl reads no such key: it calls ray.init(), which takes the head from "
    "RAY_ADDRESS (export RAY_ADDRESS=<head-ip>:6379) or from `ray start` on this machine",
}


def lint_keys(launch: Launch, config: VerlConfig) -> list[Finding]:
    """Hydra struct mode: plain keys must exist, `+` keys must not, `~` keys must."""
    findings = []
    for o in launch.overrides:
        head = o.key.split(".")[0]
        group = o.key.split("@")[0]
        if head == "hydra" or group in config.groups or config.is_unchecked(o.key):
            continue
        exists = config.has(o.key)
        if o.prefix == "" and not exists:
            hint = KNOWN_NON_KEYS.get(o.key)
            near = config.suggest(o.key)
            remedy = (
                hint
                or (f"did you mean {near}? " if near else "")
                + f"If the code you run reads it, add it as +{o.text}"
            )
            findings.append(
                Finding(
                    status="fail",
                    message=f"{o.key} is not in verl {config.version}'s config: Hydra stops with "
                    f"\"Could not override '{o.key}'\" (key not in struct)",
                    remedy=remedy,
                )
            )
        elif o.prefix == "+" and exists:
            findings.append(
                Finding(
                    status="fail",
                    message=f"+{o.key}: the key already exists in verl {config.version}'s config "
                    f"(Hydra: \"Could not append to config. An item is already at '{o.key}'\")",
                    remedy=f"drop the '+': {o.text[1:]}",
                )
            )
        elif o.prefix == "~" and not exists:
            findings.append(
                Finding(
                    status="fail",
                    message=f"~{o.key}: nothing to delete, verl {config.version}'s config has no such key",
                    remedy=f"remove {o.text}",
                )
            )
    return findings
