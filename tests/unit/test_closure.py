"""A row's closure: per-target pins from a base set and its differences, the fallback for a target
never resolved, and an environment's state against the closure it was installed with."""

from __future__ import annotations

from verl_setup.environment.closure_state import closure_state
from verl_setup.matrix.closure import Closure, Moved, closure_for
from verl_setup.matrix.resolved import Resolution, delta, target_key

BASE = {"numpy": ("2.2.6", "a"), "av": ("19.0.2", "b"), "tomli": ("2.5.0", "c")}


def resolution() -> Resolution:
    return Resolution(
        row_sha256="x",
        python="3.12.3",
        platform="x86_64-manylinux_2_28",
        pins=BASE,
        recorded="2026-12-02",
        as_of="2026-11-28",
        targets={"3.10 x86_64": {"av": "17.1.0", "exceptiongroup": "1.3.2"}, "3.11 x86_64": {"tomli": None}},
    )


def test_a_target_is_the_base_set_with_its_differences_applied() -> None:
    r = resolution()
    assert r.base_target == "3.12 x86_64"
    assert r.pins_for("3.12 x86_64") == {"numpy": "2.2.6", "av": "19.0.2", "tomli": "2.5.0"}
    assert r.pins_for("3.10 x86_64") == {
        "numpy": "2.2.6",
        "av": "17.1.0",
        "tomli": "2.5.0",
        "exceptiongroup": "1.3.2",
    }
    assert r.pins_for("3.11 x86_64") == {"numpy": "2.2.6", "av": "19.0.2"}
    assert r.pins_for("3.12 aarch64") is None


def test_delta_stores_only_what_differs() -> None:
    base = {"a": "1", "b": "2"}
    assert delta(base, {"a": "1", "b": "3", "c": "4"}) == {"b": "3", "c": "4"}
    assert delta(base, {"a": "1"}) == {"b": None}
    assert delta(base, dict(base)) == {}


def test_a_target_never_resolved_falls_back_to_the_index_as_of_the_closure() -> None:
    r = resolution()
    closure = closure_for(
        r.pins_for(target_key("3.12.1", "aarch64")),
        row="cpu",
        python="3.12.1",
        arch="aarch64",
        recorded=r.recorded,
        as_of=r.as_of,
        level="imports",
        any_recorded=True,
    )
    assert (closure.source, closure.pins, closure.exclude_newer) == (
        "exclude-newer",
        (),
        "2026-11-28T23:59:59Z",
    )
    assert "2026-11-28" in closure.words()


def test_no_dates_from_an_index_without_upload_times_means_no_closure_said_so() -> None:
    closure = closure_for(
        None, row="r", python="3.11", arch="x86_64", recorded="2026-12-02", level="-", any_recorded=True,
        dated_index=False,
    )  # fmt: skip
    assert closure.source == "none"
    assert closure.exclude_newer is None
    assert "no upload dates" in closure.words()


def test_a_recorded_closure_becomes_constraints_less_what_the_row_installs_itself() -> None:
    closure = Closure(
        row="r", target="3.12 x86_64", source="recorded", pins=(("mbridge", "0.15.1"), ("six", "1.17.0"))
    )
    assert closure.constraints(skip=("mbridge",)) == ("six==1.17.0",)


def test_an_upgraded_closure_remembers_the_recorded_set_it_moved_from() -> None:
    moved = (Moved(name="httpx", was="0.28.1", now="0.29.0"), Moved(name="new", was=None, now="1.0"))
    closure = Closure(
        row="r",
        target="3.12 x86_64",
        source="upgraded",
        pins=(("httpx", "0.29.0"), ("new", "1.0"), ("six", "1")),
        moved=moved,
    )
    assert closure.recorded_pins() == {"httpx": "0.28.1", "six": "1"}


def test_verify_states_matches_newer_and_differs() -> None:
    record = {"source": "recorded", "recorded": "2026-12-02", "pins": {"httpx": "0.28.1", "six": "1.17.0"}}
    matches = closure_state({"httpx": "0.28.1", "six": "1.17.0", "verl": "0.9.1"}, record)
    assert matches is not None
    assert (matches.state, matches.held) == ("matches", 2)
    differs = closure_state({"httpx": "0.29.0", "six": "1.17.0"}, record)
    assert differs is not None
    assert differs.state == "differs"
    assert differs.moved == (("httpx", "0.28.1", "0.29.0"),)
    newer = closure_state({"httpx": "0.29.0", "six": "1.17.0"}, {**record, "source": "upgraded"})
    assert newer is not None
    assert newer.state == "newer"
    assert "httpx 0.28.1 -> 0.29.0" in newer.words()
    assert closure_state({"six": "1"}, None) is None
