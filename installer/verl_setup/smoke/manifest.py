"""What a smoke run needs from the environment's manifest: its row, verl, engine and interpreter."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verl_setup.environment.verify import MANIFEST
from verl_setup.errors import BadInputError
from verl_setup.util.bounded import one_line


@dataclass(frozen=True, kw_only=True)
class SmokeTarget:
    """The installed environment a smoke run trains in."""

    prefix: Path
    row: str
    verl: str
    engine: str | None  # vllm or sglang where installed
    flash_attn: bool

    @property
    def python(self) -> Path:
        return self.prefix / "bin" / "python"

    @property
    def ray(self) -> Path:
        return self.prefix / "bin" / "ray"


def read_target(prefix: Path) -> SmokeTarget:
    """The env's manifest, read; BadInputError when the prefix is no env verl-setup installed."""
    path = prefix / MANIFEST
    try:
        record: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        row = str(record["row"]["id"])
        dists = {str(k).lower(): str(v) for k, v in dict(record["distributions"]).items()}
    except FileNotFoundError as exc:
        raise BadInputError(
            f"{one_line(str(prefix))} has no {MANIFEST}: not an env `verl-setup install` made"
        ) from exc
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise BadInputError(f"{one_line(str(path))}: not a verl-setup manifest ({exc})") from exc
    if "verl" not in dists:
        raise BadInputError(f"{one_line(str(path))}: verl is not among the installed distributions")
    engine = next((e for e in ("vllm", "sglang") if e in dists), None)
    return SmokeTarget(
        prefix=prefix,
        row=row,
        verl=_version(dists["verl"]),
        engine=engine,
        flash_attn="flash-attn" in dists or "flash_attn" in dists,
    )


def _version(value: str) -> str:
    # distributions may map a name to "1.2.3" or to a record with a version
    return value.split(maxsplit=1)[0]
