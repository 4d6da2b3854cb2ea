"""The failed run's own launch settings, where its log shows them: Hydra's "Error executing job with
overrides: [...]" line, or the command itself (`set -x` echoes it; users paste it with backslash
continuations). The CUDA-OOM verdict hands them to the training-memory planner."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

from verl_setup.diagnose.scan import Hit, clean
from verl_setup.doctor.probes.launch_command import hydra_value

SCAN_LIMIT = 64 << 20  # bytes read to find the launch line again (it is near a log's start)
KEEP = 256  # continuation lines kept at most
LINE = 64 << 10  # bytes of one line read at most
_HYDRA = re.compile(r"Error executing job with overrides: \[")
_ITEM = re.compile(r"'((?:[^'\\]|\\.)*)'")
_KEY = re.compile(r"^\+{0,2}~?(?P<key>[A-Za-z_][\w.]*)=(?P<value>.*)$", re.DOTALL)


def launch_values(hit: Hit) -> dict[str, Any]:
    """key -> value of the overrides the launch line (and its continuation lines) gives."""
    if _HYDRA.search(hit.text):
        tail = hit.text[_HYDRA.search(hit.text).end() :]  # type: ignore[union-attr]
        items = _ITEM.findall(tail)
    else:
        items = _words(_command(hit))
    values: dict[str, Any] = {}
    for item in items:
        if m := _KEY.match(item.strip()):
            values[m["key"]] = hydra_value(m["value"])
    return values


def _command(hit: Hit) -> str:
    """The command from the hit's line on, its backslash continuations joined."""
    lines = _lines_from(hit) or [hit.text, *hit.after]
    out: list[str] = []
    for line in lines[:KEEP]:
        text = line.rstrip()
        if text.endswith("\\"):
            out.append(text[:-1])
            continue
        out.append(text)
        break
    return " ".join(out)


def _words(command: str) -> list[str]:
    start = command.find("verl.trainer.main_")
    if start < 0:
        return []
    rest = command[start:].split(None, 1)[1:] or [""]
    try:
        return shlex.split(rest[0])
    except ValueError:  # an unclosed quote in a pasted line
        return rest[0].split()


def _lines_from(hit: Hit) -> list[str]:
    """The file's lines from the hit's line number on (bounded), or [] if it cannot be read."""
    if not Path(hit.path).is_file():
        return []
    try:
        with Path(hit.path).open("rb") as handle:
            seen, read = 0, 0
            while read <= SCAN_LIMIT and (raw := handle.readline(LINE)):
                seen, read = seen + 1, read + len(raw)
                if seen >= hit.number:
                    rest = [clean(raw)]
                    while len(rest) < KEEP and (more := handle.readline(LINE)):
                        rest.append(clean(more))
                    return rest
    except OSError:
        return []
    return []
