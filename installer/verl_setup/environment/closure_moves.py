"""Moving a row's closure: `--upgrade` resolves the row anew within its pins and says what moved
before anything changes; a closure release that was yanked or deleted since is named, with the
nearest release that replaces it, so the install stops instead of installing it (or failing on it)."""

from __future__ import annotations

import contextlib
import re
import tempfile
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from verl_setup.environment.index import Index, Release, configured_index
from verl_setup.errors import InstallError
from verl_setup.matrix.closure import Closure, Moved
from verl_setup.plan.select import Plan

COMPILE_TIMEOUT_S = 900.0
LOOKUPS = 8  # index pages read at once
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;\\]+)", re.MULTILINE)


def fresh_closure(plan: Plan, *, uv: str, env: Mapping[str, str], say: Callable[[str], None]) -> Closure:
    """The row resolved anew within its pins for this target, as a closure that names what moved
    off the recorded one (with upload dates), each said before anything is installed."""
    from verl_setup.environment.uv import compile_command, explain_failure, write_inputs  # noqa: PLC0415
    from verl_setup.util.runner import ProgramError, run  # noqa: PLC0415

    row, recorded = plan.row, plan.closure
    with tempfile.TemporaryDirectory(prefix="verl-setup-upgrade-") as tmp:
        _, overrides = write_inputs(row, Path(tmp), plan.matrix.rows_file.without_extensions(row))
        argv = compile_command(
            uv,
            row=row,
            matrix=plan.matrix,
            python=plan.python,
            requirements=Path("requirements.in"),
            overrides=None if overrides is None else Path(overrides.name),
        )
        try:
            out = run(argv, timeout=COMPILE_TIMEOUT_S, env=env, cwd=tmp)
        except ProgramError as exc:
            raise InstallError(f"uv pip compile: {exc}") from exc
    if out.returncode != 0:
        raise InstallError(f"row {row.id} does not resolve anew: {explain_failure(out.stderr)}")
    fresh = {str(canonicalize_name(m[1])): m[2] for m in _PIN.finditer(out.stdout)}
    was = dict(recorded.pins)
    names = sorted(n for n in set(was) | set(fresh) if was.get(n) != fresh.get(n))
    dates = upload_dates([(n, fresh[n]) for n in names if n in fresh], uv, env)
    moved = tuple(Moved(name=n, was=was.get(n), now=fresh.get(n), uploaded=dates.get(n)) for n in names)
    if recorded.source != "recorded":
        say(f"--upgrade: no recorded closure to move from ({recorded.words()}); resolved anew")
    elif moved:
        say(f"--upgrade: {len(moved)} distribution(s) move off the closure recorded {recorded.recorded}:")
        for m in moved:
            say(f"  {m.words()}")
    else:
        say(f"--upgrade: nothing moved; the index still resolves to the closure recorded {recorded.recorded}")
    return replace(recorded, source="upgraded", pins=tuple(sorted(fresh.items())), moved=moved)


def upload_dates(pins: list[tuple[str, str]], uv: str, env: Mapping[str, str]) -> dict[str, str]:
    """name -> upload date of that version, where the index says (best effort: a date is a detail)."""
    if not pins:
        return {}
    try:
        index = Index(configured_index(uv, env))
    except InstallError:
        return {}

    def one(pin: tuple[str, str]) -> tuple[str, str | None]:
        try:
            release = index.releases(pin[0]).get(pin[1])
        except InstallError:
            return pin[0], None
        return pin[0], None if release is None or release.uploaded is None else release.uploaded[:10]

    with ThreadPoolExecutor(LOOKUPS) as pool:
        return {name: date for name, date in pool.map(one, pins) if date}


def gone_from_index(closure: Closure, uv: str, env: Mapping[str, str]) -> list[str]:
    """One line per closure release that the index has yanked or deleted since it was recorded,
    with the nearest release that replaces it. Read from the index uv is configured with."""
    index = Index(configured_index(uv, env))

    def one(pin: tuple[str, str]) -> str | None:
        name, version = pin
        try:
            releases = index.releases(name)
        except InstallError:
            return None  # an extra index's project (torch): uv itself reports what it cannot find
        if not releases:
            return None
        release = releases.get(version)
        if release is not None and release.files and release.yanked is None:
            return None
        gone = release is None or not release.files
        why = "deleted from the index" if gone else f"yanked ({release.yanked if release else ''})"
        nearest = _nearest(version, releases)
        instead = f"; the nearest release is {nearest}" if nearest else "; no other release to take"
        return f"{name} {version} of the row's closure (recorded {closure.recorded}) was {why}{instead}"

    with ThreadPoolExecutor(LOOKUPS) as pool:
        return [line for line in pool.map(one, closure.pins) if line]


def _nearest(version: str, releases: Mapping[str, Release]) -> str | None:
    """The usable release closest to `version`: the next newer one, else the newest older one."""
    try:
        want = Version(version)
    except InvalidVersion:
        return None
    usable = []
    for text, release in releases.items():
        try:
            usable += [Version(text)] if release.files and release.yanked is None else []
        except InvalidVersion:
            continue
    newer = sorted(v for v in usable if v > want and not v.is_prerelease)
    older = sorted(v for v in usable if v < want)
    return str(newer[0]) if newer else str(older[-1]) if older else None


class GoneWatch:
    """gone_from_index in a background thread while uv installs (it costs no wall time), read
    before the new environment replaces the old one; a slow or unreachable index only skips it."""

    WAIT_S = 30.0

    def __init__(self, closure: Closure | None, uv: str, env: Mapping[str, str]) -> None:
        self._lines: list[str] = []
        self._thread: threading.Thread | None = None
        if closure is None or closure.source != "recorded" or env.get("UV_OFFLINE") not in (None, "", "0"):
            return

        def work() -> None:
            with contextlib.suppress(InstallError):
                self._lines = gone_from_index(closure, uv, env)

        self._thread = threading.Thread(target=work, name="verl-setup-closure-watch", daemon=True)
        self._thread.start()

    def stop_if_gone(self) -> None:
        """InstallError naming the first closure release the index no longer offers, if any."""
        if self._thread is None:
            return
        self._thread.join(self.WAIT_S)
        if self._thread.is_alive() or not self._lines:
            return
        more = f" (and {len(self._lines) - 1} more)" if len(self._lines) > 1 else ""
        raise InstallError(
            f"{self._lines[0]}{more}: nothing was changed; `--upgrade` resolves the row anew within its "
            "pins (an unproven set), or use a row whose closure `matrix prove` recorded since"
        )
