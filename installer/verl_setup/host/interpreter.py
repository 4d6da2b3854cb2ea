"""The one interpreter probe: ask a Python, in a child process, what it is and what it holds.

It answers the three questions every caller has: the libpython really loaded (/proc/self/maps),
whether `python --version` agrees with it, and which distributions are installed (their
metadata only: nothing is imported). Callers keep their own judgement of the answer: detect
lists interpreters, doctor inspects a training env, verify compares an env with its lock.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from verl_setup.scripts import script_path
from verl_setup.util.runner import ProgramError, run, stream

_FLAG = re.compile(r"Python (\S+)")


class NoAnswer(Exception):  # noqa: N818  # an outcome the callers judge, not an error of ours
    """The interpreter did not run, timed out, or printed no answer: the message says which."""


def shim_folder(folder: str) -> bool:
    """pyenv's shims folder: its shims re-dispatch to pyenv (slow, and exit 127 for inactive
    versions); pyenv's versions folder reaches the same interpreters directly."""
    return folder.rstrip("/").endswith("shims")


@dataclass(frozen=True, kw_only=True)
class Distribution:
    """One installed distribution as its metadata names it, where it was found, in sys.path order."""

    name: str
    version: str
    location: str
    requires: tuple[str, ...] | None = None  # Requires-Dist, where it was asked for


@dataclass(frozen=True, kw_only=True)
class Answer:
    """What one interpreter said about itself."""

    exe: str
    version: str  # X.Y.Z of the running libpython (sys.version_info)
    full_version: str  # with the release level: 3.13.0rc1
    implementation: str
    libpython: str | None
    version_flag: str | None  # what `exe --version` printed
    executable: str
    prefix: str | None = None  # these three with the "paths" part
    base_prefix: str | None = None
    purelib: str | None = None
    platform: str | None = None
    hostname: str | None = None
    markers: dict[str, str] = field(default_factory=dict)
    distributions: tuple[Distribution, ...] = ()

    @property
    def mismatch(self) -> str | None:
        """`--version` disagreeing with the libpython that runs, in words; None when they agree."""
        if not self.version_flag or self.version_flag == self.version:
            return None
        where = f" ({self.libpython})" if self.libpython else ""
        return (
            f"`{Path(self.exe).name} --version` says {self.version_flag} but the running libpython is "
            f"{self.version}{where}"
        )


def answer_from(exe: str, data: Mapping[str, Any], version_flag: str | None = None) -> Answer:
    """An Answer from the child's mapping (also what verify's Ray task sends back from each node)."""
    dists = tuple(
        Distribution(
            name=str(n), version=str(v), location=str(loc), requires=None if r is None else tuple(map(str, r))
        )
        for n, v, loc, r in data.get("distributions", ())
    )
    optional = {
        k: None if data.get(k) is None else str(data[k])
        for k in ("prefix", "base_prefix", "purelib", "platform", "hostname")
    }
    return Answer(
        exe=exe,
        version=str(data["version"]),
        full_version=str(data["full_version"]),
        implementation=str(data["implementation"]),
        libpython=None if data.get("libpython") is None else str(data["libpython"]),
        version_flag=version_flag,
        executable=str(data["executable"]),
        markers={str(k): str(v) for k, v in (data.get("markers") or {}).items()},
        distributions=dists,
        **optional,
    )


def ask(
    exe: Path,
    *,
    timeout: float,
    env: Mapping[str, str] | None = None,
    parts: Collection[str] = (),
    distributions: Collection[str] | Literal["*"] = (),
    requires: Collection[str] = (),
    tied: bool = False,
) -> Answer:
    """Run the child in `exe` (and `exe --version`); raise NoAnswer when it cannot answer.

    `parts`: "paths" (prefix, base_prefix, purelib), "markers" (PEP 508 markers, platform, hostname).
    `distributions`: canonical names to list, "*" for every one; `requires`: whose Requires-Dist
    to include. `tied`: the child dies with us and Ctrl-C kills it (for a long listing).
    """
    names = distributions if isinstance(distributions, str) else ",".join(distributions)
    # Without site (-S) the bare questions cost a third less start-up, on every interpreter found.
    bare = ["-S"] if not parts and not names else []
    argv = [str(exe), *bare, str(script_path("interpreter")), ",".join(parts), names, ",".join(requires)]
    runner = stream if tied else run
    try:
        child = runner(argv, timeout=timeout, env=env)
        flag = run([str(exe), "--version"], timeout=timeout, env=env) if child.returncode == 0 else None
    except ProgramError as exc:
        raise NoAnswer(f"cannot run {exe}: {exc}") from exc
    if flag is None:
        lines = [ln.strip() for ln in child.stderr.splitlines() if ln.strip()]
        raise NoAnswer(f"{exe} could not describe itself: {lines[-1] if lines else 'no message'}")
    try:
        data = ast.literal_eval(child.stdout)  # literals only: nothing the child prints is run
        m = _FLAG.search(flag.stdout + flag.stderr)
        return answer_from(str(exe), data, m[1] if m else None)
    except (ValueError, SyntaxError, KeyError, TypeError, AttributeError, MemoryError, RecursionError) as exc:
        raise NoAnswer(f"{exe} gave no readable answer ({type(exc).__name__})") from exc
