"""The one subprocess wrapper reads under a cap while it reads: a child that never stops printing
is stopped at the cap with "output over N MiB, cut", on run() and stream() alike."""

from __future__ import annotations

import time

import pytest

from verl_setup.util.runner import ProgramError, run, stream


@pytest.mark.subprocess
def test_a_child_that_never_stops_printing_is_cut_at_the_cap() -> None:
    started = time.monotonic()
    with pytest.raises(ProgramError, match=r"^yes: output over 1 MiB, cut$") as caught:
        run(["yes"], timeout=30, limit=2**20)
    assert caught.value.cut
    assert len(caught.value.stdout) == 2**20
    with pytest.raises(ProgramError, match=r"output over 16 MiB, cut"):
        stream(["yes"], timeout=30)
    assert time.monotonic() - started < 20


@pytest.mark.subprocess
def test_output_up_to_the_cap_is_kept_whole() -> None:
    out = run(["head", "-c", str(2**20), "/dev/zero"], timeout=30, limit=2**20)
    assert out.returncode == 0
    assert len(out.stdout) == 2**20
    both = run(["sh", "-c", "echo out; echo err >&2; exit 3"], timeout=30)
    assert (both.returncode, both.stdout, both.stderr) == (3, "out\n", "err\n")
