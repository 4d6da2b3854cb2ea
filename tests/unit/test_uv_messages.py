"""uv failures named by their cause (M1, W6 of round 4). The stderr texts are uv 0.13.9's own,
recorded on this machine: `UV_OFFLINE=1 UV_CACHE_DIR=<empty> uv pip install six==1.17.0`, and
`uv pip install "flash-attn @ file://.../flash_attn-2.8.3-py3-none-any.whl"` of a wheel whose
.dist-info is evil_pkg-6.6.6 (the review's `liar` index)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from verl_setup.environment.staging import Layout
from verl_setup.environment.uv import explain_failure

OFFLINE_COLD_CACHE = (
    "Using Python 3.11.7 environment at: v\n"
    "error: No solution found when resolving dependencies\n"
    "  cause: Because six was not found in the cache and you require six==1.17.0, we can conclude that "
    "your requirements are unsatisfiable.\n"
    "\n"
    "hint: Packages were unavailable because the network was disabled. When the network is disabled, "
    "registry packages may only be read from the cache.\n"
)
LIAR_WHEEL = (
    "Using Python 3.11.7 environment at: v\n"
    "error: Failed to read `flash-attn @ file:///tmp/reliab-r/liar/flash_attn-2.8.3-py3-none-any.whl`\n"
    "  cause: Failed to read metadata: /tmp/reliab-r/liar/flash_attn-2.8.3-py3-none-any.whl\n"
    "  cause: The .dist-info directory `evil_pkg-6.6.6` does not start with the normalized package "
    "name: flash-attn\n"
)


def test_m1_offline_with_a_cold_cache_is_not_a_conflict() -> None:
    message = explain_failure(OFFLINE_COLD_CACHE)
    assert message.startswith("offline (UV_OFFLINE=1 or --offline) and six is not in the uv cache")
    assert "conflict" not in message


def test_w6_a_wheel_naming_another_project_is_not_a_network_failure() -> None:
    message = explain_failure(LIAR_WHEEL.replace("Failed to read", "Failed to download", 1))
    assert "metadata names another project" in message
    assert "could not be reached" not in message
    assert message.startswith("flash-attn: ")


def test_d1_a_full_prefix_is_not_blamed_on_the_cache_uv_copies_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """uv names the cache as the source of the copy that failed; the prefix's disk is the full one."""
    from verl_setup.environment import install  # noqa: PLC0415

    cache, prefix = tmp_path / "cache", tmp_path / "small" / "env"
    job = SimpleNamespace(uv="uv", layout=Layout(prefix=prefix), staging=prefix.with_name(".env.staging-1"))
    # uv 0.13.9's own, recorded on this machine (a 30 MiB tmpfs, filled, holding the venv), with
    # this test's paths in place of the recorded ones
    stderr = (
        "error: Failed to install: numpy-2.2.6-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl "
        "(numpy==2.2.6)\n"
        f"  cause: Failed to copy to `{job.staging}/lib/python3.11/site-packages/numpy.libs/"
        "libquadmath-96973f99-934c22de.so.0.0.0`\n"
        f"  cause: failed to copy file from {cache}/archive-v0/7WWgeDlR04vjE7Gs/numpy.libs/"
        f"libquadmath-96973f99-934c22de.so.0.0.0 to {job.staging}/lib/python3.11/site-packages/"
        "numpy.libs/.tmpnBz5me: No space left on device (os error 28)\n"
    )
    monkeypatch.setattr("verl_setup.environment.uv.cache_dir", lambda _uv, _env: cache)
    for full_now in (set(), {prefix.parent}):  # the space came back when staging was removed, or not
        monkeypatch.setattr(install, "_full", lambda p, full=full_now: p in full)
        message = install._no_space(job, stderr, {})  # type: ignore[arg-type]  # the fields it reads
        assert message.startswith(f"no space left on the filesystem of {prefix.parent}"), message
    monkeypatch.setattr(install, "_full", lambda p: p == cache)
    assert "of the uv cache" in install._no_space(job, stderr, {})  # type: ignore[arg-type]
