"""Comparing what an interpreter reports with a row, a manifest, a lock, or a cluster's head."""

from __future__ import annotations

from pathlib import Path

from verl_setup.cluster.verify import Node, compare_nodes, loopback_env
from verl_setup.environment.lock import parse, render
from verl_setup.environment.verify import (
    Dist,
    Expected,
    Mismatch,
    Report,
    Snapshot,
    compare,
    from_lock,
    same_version,
)

MARKERS = {"platform_machine": "x86_64", "sys_platform": "linux", "python_version": "3.12"}


def snapshot(*dists: tuple[str, str], python: str = "3.12.3", where: str = "/env/lib/site") -> Snapshot:
    return Snapshot(
        python=python,
        executable="/env/bin/python",
        prefix="/env",
        platform="linux-x86_64",
        hostname="node",
        markers=MARKERS,
        dists=tuple(Dist(name=n, version=v, location=where) for n, v in dists),
    )


def kinds(findings: list[Mismatch]) -> set[tuple[str, str]]:
    return {(f.kind, f.name) for f in findings}


ROW = Expected(source="row cpu", pins={"verl": "0.9.1", "torch": "2.11.0", "ray": "2.58.0"}, complete=False)


def test_a_matching_env_has_no_findings() -> None:
    findings, _ = compare(
        snapshot(("verl", "0.9.1"), ("torch", "2.11.0"), ("ray", "2.58.0"), ("six", "1")), ROW
    )
    assert findings == []


def test_missing_and_replaced_packages_are_named() -> None:
    findings, _ = compare(snapshot(("verl", "0.9.1"), ("torch", "2.5.1"), ("six", "1")), ROW)
    assert kinds(findings) == {("missing", "ray"), ("replaced", "torch")}
    replaced = next(f for f in findings if f.kind == "replaced")
    assert replaced.line().split()[:4] == ["replaced", "torch", "2.11.0", "->"]


def test_a_cpu_build_of_the_pinned_torch_is_a_replacement() -> None:
    assert same_version("2.11", "2.11.0")
    assert not same_version("2.11.0+cpu", "2.11.0")
    findings, _ = compare(snapshot(("verl", "0.9.1"), ("torch", "2.11.0+cpu"), ("ray", "2.58.0")), ROW)
    assert kinds(findings) == {("replaced", "torch")}


def test_an_engine_the_row_does_not_have_is_harmful_even_against_a_row() -> None:
    env = snapshot(
        ("verl", "0.9.1"), ("torch", "2.11.0"), ("ray", "2.58.0"), ("vllm", "0.6.3"), ("pyarrow", "19")
    )
    findings, _ = compare(env, ROW)
    # pyarrow comes in through verl's own dependencies: a row's pins do not list it.
    assert kinds(findings) == {("harmful", "vllm")}


def test_watched_extras_are_harmful_against_a_complete_list() -> None:
    complete = Expected(source="lock verl.lock", pins={"verl": "0.9.1"}, complete=True)
    findings, notes = compare(snapshot(("verl", "0.9.1"), ("pyarrow", "19.0.1"), ("six", "1.17.0")), complete)
    assert kinds(findings) == {("harmful", "pyarrow")}
    assert any("six" in n for n in notes)


def test_opencv_beside_opencv_headless_is_flagged() -> None:
    env = snapshot(("opencv-python-headless", "4.10.0.84"), ("opencv-python", "4.10.0.84"))
    findings, _ = compare(env, Expected(source="x", pins={}, complete=False))
    assert kinds(findings) == {("harmful", "opencv-python-headless")}
    assert "beside opencv-python" in findings[0].note


def test_old_pynvml_beside_nvidia_ml_py_is_harmful_but_the_shim_from_12_is_not() -> None:
    """pynvml 11.x ships a `pynvml` package; from 12 on it is a shim that requires nvidia-ml-py
    (found when `make prove` flagged the sglang 0.5.2 and 0.4.6.post5 rows, which pull 13.0.1)."""
    old = snapshot(("pynvml", "11.5.3"), ("nvidia-ml-py", "12.535.161"))
    findings, _ = compare(old, Expected(source="x", pins={}, complete=False))
    assert kinds(findings) == {("harmful", "nvidia-ml-py")}
    shim = snapshot(("pynvml", "13.0.1"), ("nvidia-ml-py", "13.615.71"))
    assert compare(shim, Expected(source="x", pins={}, complete=False))[0] == []


def test_a_second_torch_on_sys_path_is_a_duplicate() -> None:
    env = snapshot(("torch", "2.11.0"), ("verl", "0.9.1"), ("ray", "2.58.0"))
    env = Snapshot(
        **{**env.__dict__, "dists": (*env.dists, Dist(name="torch", version="2.5.1", location="/usr/lib"))}
    )
    findings, _ = compare(env, ROW)
    assert kinds(findings) == {("duplicate", "torch")}
    assert "2.5.1 in /usr/lib" in findings[0].note


def test_rays_vendored_copy_in_its_workers_sys_path_is_no_duplicate() -> None:
    # Seen in a Ray task: colorama in ray/thirdparty_files beside the environment's own colorama.
    env = snapshot(("torch", "2.11.0"), ("verl", "0.9.1"), ("ray", "2.58.0"), ("colorama", "0.4.6"))
    vendored = Dist(
        name="colorama", version="0.4.6", location="/env/lib/python3.11/site-packages/ray/thirdparty_files"
    )
    env = Snapshot(**{**env.__dict__, "dists": (*env.dists, vendored)})
    assert env.duplicates() == {}


def test_python_patch_differences_are_noted_and_minor_differences_fail() -> None:
    lock = Expected(source="lock l", pins={}, complete=True, python="3.12.3")
    findings, notes = compare(snapshot(python="3.12.1"), lock)
    assert findings == []
    assert "3.12.1" in notes[0]
    findings, _ = compare(snapshot(python="3.10.13"), lock)
    assert kinds(findings) == {("python", "python")}


def test_lock_markers_are_evaluated_for_the_target_interpreter() -> None:
    body = (
        "torch==2.11.0 \\\n    --hash=sha256:" + "1" * 64 + "\n"
        "triton==3.5.0 ; platform_machine == 'x86_64' \\\n    --hash=sha256:" + "2" * 64 + "\n"
        "pywin32==311 ; sys_platform == 'win32' \\\n    --hash=sha256:" + "3" * 64 + "\n"
    )
    fields = dict.fromkeys(("row", "row-sha256", "matrix", "matrix-sha256", "platform", "uv"), "x")
    lock = parse(
        render({**fields, "python": "3.12.3", "index-url": "default", "flash-attn": "none"}, body), Path("l")
    )
    assert from_lock(lock, MARKERS).pins == {"torch": "2.11.0", "triton": "3.5.0"}


def test_the_report_names_every_finding_and_sums_up_in_one_line() -> None:
    env = snapshot(("verl", "0.9.1"), ("torch", "2.5.1"))
    findings, notes = compare(env, ROW)
    report = Report(snapshot=env, expected=ROW, findings=tuple(findings), notes=tuple(notes))
    assert not report.ok
    assert "missing    ray 2.58.0" in report.text()
    assert report.summary() == "/env does not match row cpu: 1 missing (ray); 1 replaced (torch)"
    assert "\n" not in report.summary()
    assert report.to_json()["findings"][0]["kind"] == "missing"


def node(node_id: str, snap: Snapshot | None, *, head: bool = False, error: str | None = None) -> Node:
    return Node(node_id=node_id, ip="10.0.0.1", head=head, snapshot=snap, error=error)


def test_a_worker_node_with_another_python_patch_or_torch_differs_from_the_head() -> None:
    head = node("aaaa", snapshot(("torch", "2.11.0"), ("verl", "0.9.1")), head=True)
    same = node("bbbb", snapshot(("torch", "2.11.0"), ("verl", "0.9.1")))
    other = node("cccc", snapshot(("torch", "2.10.0"), ("verl", "0.9.1"), python="3.12.1"))
    gone = node("dddd", None, error="no answer within 90s")
    results = {n.node_id: findings for n, findings, _ in compare_nodes([head, same, other, gone], None)}
    assert results["aaaa"] == []
    assert results["bbbb"] == []
    assert kinds(results["cccc"]) == {("python", "python"), ("replaced", "torch")}
    assert kinds(results["dddd"]) == {("unreachable", "dddd")}


def test_a_local_cluster_client_stays_on_loopback() -> None:
    assert loopback_env("127.0.0.1:6379", {})["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] == "0"
    assert loopback_env("localhost:6379", {})["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] == "0"
    assert "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER" not in loopback_env("10.1.2.3:6379", {})
    assert loopback_env("127.0.0.1:6379", {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "1"}) == {
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "1"
    }
