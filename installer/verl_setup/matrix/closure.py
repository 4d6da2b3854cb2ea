"""A row's closure on one target: every distribution its recorded resolution installed, so that an
install today, next month and on the next node is the same set (matrices/resolved.yaml).

The row's own pins stay requirements; the closure holds everything below them, handed to uv as
constraints. A target the row was never resolved for falls back to uv's --exclude-newer at the
closure's recording date: not the proven set, but the same set every day. A row edited since its
closure was recorded has none until `matrix prove` records one: then the stack below its pins floats,
and plan and install say so.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from verl_setup.matrix.resolved import target_key

ClosureSource = Literal["recorded", "exclude-newer", "upgraded", "none"]


@dataclass(frozen=True, kw_only=True)
class Moved:
    """One distribution a fresh resolution moved off the closure (`--upgrade`)."""

    name: str
    was: str | None  # None: new in the fresh set
    now: str | None  # None: no longer part of it
    uploaded: str | None = None  # when `now` was uploaded, where the index says

    def words(self) -> str:
        """`accelerate 1.15.0 -> 1.16.0 (uploaded 2026-12-04)`."""
        when = f" (uploaded {self.uploaded})" if self.uploaded else ""
        return f"{self.name} {self.was or '(new)'} -> {self.now or '(gone)'}{when}"

    def to_json(self) -> dict[str, Any]:
        """Plain data for --json and the manifest."""
        return {"name": self.name, "from": self.was, "to": self.now, "uploaded": self.uploaded}


@dataclass(frozen=True, kw_only=True)
class Closure:
    """What an install holds the row's transitive packages to on one target, and why."""

    row: str
    target: str  # "3.12 x86_64"
    source: ClosureSource
    pins: tuple[tuple[str, str], ...] = ()  # (distribution, version), sorted
    recorded: str | None = None  # YYYY-MM-DD of the resolution
    as_of: str | None = None  # the newest upload among its pins: --exclude-newer's date
    level: str = "-"  # the row's proof level, in plan's words
    moved: tuple[Moved, ...] = ()  # source "upgraded": what moved off the recorded closure
    note: str = ""  # source "none": why there is no closure for this target

    @property
    def exclude_newer(self) -> str | None:
        """uv's --exclude-newer for a target without a recorded set: the end of the recording day."""
        day = self.as_of or self.recorded
        return f"{day}T23:59:59Z" if self.source == "exclude-newer" and day else None

    def constraints(self, skip: Iterable[str] = ()) -> tuple[str, ...]:
        """`name==version` lines for uv's --constraint, less the distributions in `skip` (those
        installed from a direct reference or by their own step)."""
        left_out = set(skip)
        return tuple(f"{name}=={version}" for name, version in self.pins if name not in left_out)

    def recorded_pins(self) -> dict[str, str]:
        """The recorded closure's pins (for an upgraded one: before what moved)."""
        pins = dict(self.pins)
        for m in self.moved:
            if m.was is None:
                pins.pop(m.name, None)
            else:
                pins[m.name] = m.was
        return pins

    def words(self) -> str:
        """The one line plan and install print about it, after the word "closure"."""
        if self.source == "recorded":
            return (
                f"recorded {self.recorded or '(undated)'}, proven to {self.level}: "
                f"{len(self.pins)} distributions held (Python {self.target})"
            )
        if self.source == "upgraded":
            return (
                f"resolved anew (--upgrade): {len(self.moved)} distribution(s) moved off the closure "
                f"recorded {self.recorded or '(undated)'}; this set is unproven"
            )
        if self.source == "exclude-newer":
            day = self.as_of or self.recorded
            return (
                f"none recorded for Python {self.target}: resolved as the index stood on {day} "
                "(uv --exclude-newer): the same set every day, not a proven one"
            )
        return f"none for Python {self.target}: {self.note}; the packages below the row's pins float"

    def to_json(self) -> dict[str, Any]:
        """Plain data for --json and the manifest (the pins themselves are in the lock or manifest)."""
        return {
            "source": self.source,
            "target": self.target,
            "recorded": self.recorded,
            "level": self.level,
            "distributions": len(self.pins),
            "exclude_newer": self.exclude_newer,
            "moved": [m.to_json() for m in self.moved],
        }


def closure_for(
    resolution_pins: dict[str, str] | None,
    *,
    row: str,
    python: str,
    arch: str,
    recorded: str | None,
    level: str,
    any_recorded: bool,
    as_of: str | None = None,
    dated_index: bool = True,
) -> Closure:
    """The closure on one target from the row's recorded resolution (see Matrix.closure)."""
    target = target_key(python, arch)
    if resolution_pins is not None:
        return Closure(
            row=row,
            target=target,
            source="recorded",
            pins=tuple(sorted(resolution_pins.items())),
            recorded=recorded,
            as_of=as_of,
            level=level,
        )
    if any_recorded and (as_of or recorded) and dated_index:
        return Closure(
            row=row, target=target, source="exclude-newer", recorded=recorded, as_of=as_of, level=level
        )
    if not any_recorded:
        note = f"row {row} was edited since its last proof (`verl-setup matrix prove {row}` records one)"
    elif not dated_index:
        # uv treats a file without an upload time as newer than any --exclude-newer date.
        note = "never resolved for this target, and the row's torch index gives no upload dates"
    else:
        note = "never resolved for this target, and its resolution has no recorded date"
    return Closure(row=row, target=target, source="none", level=level, note=note)
