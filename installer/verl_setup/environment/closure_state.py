"""Whether an installed environment still holds the closure it was installed with (its manifest's
`closure` record): the set `matrix prove` proved, or a newer one that `--upgrade` chose."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from packaging.utils import canonicalize_name

State = Literal["matches", "newer", "differs"]


@dataclass(frozen=True, kw_only=True)
class ClosureState:
    """The environment against its closure: which distributions differ, and why that is."""

    state: State
    recorded: str | None
    held: int  # distributions the closure names that the environment has
    moved: tuple[tuple[str, str, str], ...]  # (name, closure version, installed version)

    def words(self) -> str:
        """One line for verify's report."""
        when = f"recorded {self.recorded}" if self.recorded else "undated"
        if self.state == "matches":
            return f"matches its closure ({when}): {self.held} distributions at their proven versions"
        listed = ", ".join(f"{n} {was} -> {now}" for n, was, now in self.moved[:6])
        more = ", ..." if len(self.moved) > 6 else ""
        if self.state == "newer":
            return (
                f"newer than its closure ({when}): {len(self.moved)} moved by --upgrade ({listed}{more}); "
                "an unproven set until `matrix prove` records it"
            )
        return f"differs from its closure ({when}): {len(self.moved)} moved ({listed}{more})"

    def to_json(self) -> dict[str, Any]:
        """Plain data for verify --json."""
        return {
            "state": self.state,
            "recorded": self.recorded,
            "held": self.held,
            "moved": [{"name": n, "closure": was, "installed": now} for n, was, now in self.moved],
        }


def closure_state(installed: Mapping[str, str], record: Mapping[str, Any] | None) -> ClosureState | None:
    """The state for a manifest's closure record (None: installed without one)."""
    if not record or not isinstance(record.get("pins"), dict) or not record["pins"]:
        return None
    pins = {str(canonicalize_name(n)): str(v) for n, v in record["pins"].items()}
    moved = tuple(
        (name, want, installed[name])
        for name, want in sorted(pins.items())
        if name in installed and installed[name] != want
    )
    held = sum(1 for name in pins if name in installed)
    upgraded = record.get("source") == "upgraded"
    state: State = "matches" if not moved else "newer" if upgraded else "differs"
    recorded = None if record.get("recorded") is None else str(record["recorded"])
    return ClosureState(state=state, recorded=recorded, held=held, moved=moved)


def closure_json(installed: Mapping[str, str], record: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """verify --json's `closure`: the state as data, or None without a closure record."""
    state = closure_state(installed, record)
    return None if state is None else state.to_json()


def closure_notes(installed: Mapping[str, str], record: Mapping[str, Any] | None) -> list[str]:
    """verify's note on the closure (none without a closure record)."""
    state = closure_state(installed, record)
    return [] if state is None else [f"closure: {state.words()}"]
