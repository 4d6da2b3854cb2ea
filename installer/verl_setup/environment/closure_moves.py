"""Moving a row's closure: `--upgrade` resolves the row anew within its pins and says what moved
before anything changes; a closure release that was yanked or deleted since is named, with the
nearest release that replaces it, so the install stops instead of installing it (or failing on it)."""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from verl_setup.errors import InstallError
from verl_setup.matrix.closure import Closure, Moved
from verl_setup.plan.select import Plan

if TYPE_CHECKING:
    from verl_setup.environment.index import Release

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
        from verl_setup.environment.index import Index, configured_index  # noqa: PLC0415  # only now

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


def gone_from_index(
    closure: Closure, uv: str, env: Mapping[str, str], *, only: frozenset[str] | None = None
) -> list[str]:
    """One line per closure release that the index has yanked or deleted since it was recorded,
    with the nearest release that replaces it (`only`: just these names). Read from the index uv
    is configured with."""
    from verl_setup.environment.index import Index, configured_index  # noqa: PLC0415  # only now

    index = Index(configured_index(uv, env))
    pins = [p for p in closure.pins if only is None or p[0] in only]

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
        return [line for line in pool.map(one, pins) if line]


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


def yanked_by_uv(stderr: str) -> frozenset[str]:
    """The names uv warned about as yanked (`warning: `name==1.0` is yanked (reason: ...)`)."""
    return frozenset(str(canonicalize_name(m[1])) for m in _YANKED.finditer(stderr))


_YANKED = re.compile(r"^warning: `([A-Za-z0-9][A-Za-z0-9._-]*)==[^`]+` is yanked", re.MULTILINE)


class GoneWatch:
    """Stops an install on a closure release the index yanked or deleted since it was recorded.

    uv installs a yanked release that is pinned exactly, with a warning: where uv's stderr is ours
    to read, that warning names it at no cost, and a failed resolve (a deleted release) triggers a
    full pass. Where uv draws on the terminal, the whole closure is read from the index in a
    background thread at the lowest CPU priority while uv works, so uv is not slowed."""

    WAIT_S = 30.0

    def __init__(self, closure: Closure | None, uv: str, env: Mapping[str, str], *, watch: bool) -> None:
        self._closure, self._uv, self._env = closure, uv, env
        self._lines: list[str] = []
        self._thread: threading.Thread | None = None
        if closure is None or closure.source != "recorded" or env.get("UV_OFFLINE") not in (None, "", "0"):
            self._closure = None
            return
        if watch:
            self._thread = threading.Thread(target=self._read_all, name="closure-watch", daemon=True)
            self._thread.start()

    def _read_all(self) -> None:
        with contextlib.suppress(OSError, AttributeError):  # Linux: a thread has its own nice value
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        with contextlib.suppress(InstallError):
            self._lines = gone_from_index(self._closure, self._uv, self._env) if self._closure else []

    def after_step(self, uv_stderr: str) -> None:
        """After a uv step that worked: InstallError when uv installed a yanked closure release."""
        pinned = {n for n, _ in self._closure.pins} if self._closure else set()
        names = frozenset(yanked_by_uv(uv_stderr) & pinned)
        if names:
            self._stop(self._lookup(names) or [f"{', '.join(sorted(names))}: yanked, as uv says"])

    def after_failure(self) -> None:
        """After a uv step that failed: InstallError naming a deleted (or yanked) closure release,
        if that is why; otherwise nothing, and uv's own error stands."""
        if self._thread is None and self._closure is not None:
            self._lines = self._lookup(None)
        self.finish()

    def finish(self) -> None:
        """Before the swap: InstallError naming what the background pass found, if anything."""
        if self._thread is not None:
            self._thread.join(self.WAIT_S)
            if self._thread.is_alive():
                return  # a slow or unreachable index only skips the check
        if self._lines:
            self._stop(self._lines)

    def _lookup(self, only: frozenset[str] | None) -> list[str]:
        assert self._closure is not None  # noqa: S101  # callers check
        try:
            return gone_from_index(self._closure, self._uv, self._env, only=only)
        except InstallError:
            return []

    @staticmethod
    def _stop(lines: list[str]) -> None:
        more = f" (and {len(lines) - 1} more)" if len(lines) > 1 else ""
        raise InstallError(
            f"{lines[0]}{more}: nothing was changed; `--upgrade` resolves the row anew within its "
            "pins (an unproven set), or use a row whose closure `matrix prove` recorded since"
        )
