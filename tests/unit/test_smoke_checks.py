"""The smoke run's reading of main_ppo's output and its checks."""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

import pytest

from tests.conftest import FIXTURES
from verl_setup.smoke import checks
from verl_setup.smoke.metrics import StepMetrics, feed_all, parse_step, parse_value
from verl_setup.smoke.safetensors_read import to_bf16

# verl 0.9.1's console logger through Ray's log forwarding (aggregate_logger.concat_dict_to_str)
STEP_1 = (
    "(TaskRunner pid=4242) step:1 - actor/pg_loss:-0.0123 - actor/grad_norm:0.612 - "
    "training/rollout_probs_diff_mean:3.2e-05 - timing_s/gen:2.01 - actor/lr:np.float64(0.001)"
)


def test_a_console_step_line_gives_its_step_and_numbers() -> None:
    step = parse_step(STEP_1)
    assert step is not None
    n, metrics = step
    assert n == 1
    assert metrics["actor/pg_loss"] == pytest.approx(-0.0123)
    assert metrics["actor/grad_norm"] == pytest.approx(0.612)
    assert metrics["training/rollout_probs_diff_mean"] == pytest.approx(3.2e-5)
    assert metrics["actor/lr"] == pytest.approx(1e-3)


@pytest.mark.parametrize(
    ("text", "value"), [("nan", math.nan), ("inf", math.inf), ("-1e-08", -1e-8), ("x", None)]
)
def test_logged_values(text: str, value: float | None) -> None:
    got = parse_value(text)
    if value is None:
        assert got is None
    elif math.isnan(value):
        assert got is not None
        assert math.isnan(got)
    else:
        assert got == value


def test_other_lines_are_not_steps() -> None:
    assert parse_step("(TaskRunner pid=1) Training StepMetrics:  50%|") is None
    assert parse_step("epoch 0, step 1") is None


def test_stages_follow_the_output_in_order_and_never_go_back() -> None:
    p = StepMetrics(steps=2)
    assert p.stage == "workers"  # main_ppo starts once the private Ray runs
    assert p.feed("(pid=1) verl-setup-smoke: rollout start (replica 0)") == "rollout start"
    assert p.feed("(HFServer pid=2) verl-setup-smoke: rollout server ready (replica 0, /m)") == "first step"
    assert p.feed(STEP_1) == "update"
    assert p.feed("(pid=1) verl-setup-smoke: rollout start (replica 0)") is None  # no going back
    assert p.feed(STEP_1.replace("step:1", "step:2")) == "checkpoint"
    assert sorted(p.metrics) == [1, 2]


def metrics_of(*lines: str) -> dict[int, dict[str, float]]:
    return feed_all(StepMetrics(steps=2), lines).metrics


def test_losses_pass_with_finite_loss_and_positive_grad_norm_on_every_step() -> None:
    m = metrics_of(STEP_1, STEP_1.replace("step:1", "step:2"))
    assert checks.losses_check(m, 2).ok


@pytest.mark.parametrize(
    ("line2", "says"),
    [
        (STEP_1.replace("step:1", "step:2").replace("pg_loss:-0.0123", "pg_loss:nan"), "pg_loss nan"),
        (STEP_1.replace("step:1", "step:2").replace("grad_norm:0.612", "grad_norm:0.0"), "grad_norm 0.0"),
        (None, "step 2: not logged"),
    ],
    ids=["nan-loss", "zero-grad", "missing-step"],
)
def test_losses_fail_naming_the_step(line2: str | None, says: str) -> None:
    m = metrics_of(STEP_1, *([line2] if line2 else []))
    check = checks.losses_check(m, 2)
    assert not check.ok
    assert says in check.summary


def test_weight_sync_needs_every_step_below_the_threshold() -> None:
    m = metrics_of(STEP_1, STEP_1.replace("step:1", "step:2").replace("3.2e-05", "0.2"))
    assert not checks.sync_check(m, 2, 1e-3).ok
    assert checks.sync_check(m, 2, 1.0).ok
    assert not checks.sync_check(metrics_of(STEP_1), 2, 1.0).ok  # step 2 never logged


def test_exit_check() -> None:
    assert checks.exit_check(0, 100.0, 600.0).ok
    assert not checks.exit_check(1, 100.0, 600.0).ok
    stopped = checks.exit_check(None, 600.0, 600.0)
    assert not stopped.ok
    assert "stopped" in stopped.summary


def write_safetensors(path: Path, tensors: dict[str, tuple[str, bytes, list[int]]]) -> None:
    header: dict[str, object] = {}
    body = b""
    for name, (dtype, raw, shape) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(body), len(body) + len(raw)]}
        body += raw
    head = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(head)) + head + body)


def f32(*v: float) -> bytes:
    return struct.pack(f"<{len(v)}f", *v)


def bf16(*v: float) -> bytes:
    return struct.pack(
        f"<{len(v)}H", *(struct.unpack("<I", struct.pack("<f", to_bf16(x)))[0] >> 16 for x in v)
    )


def test_weights_changed_compares_f32_with_bf16_at_bf16_precision(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    write_safetensors(
        tmp_path / "a" / "model.safetensors", {"w": ("F32", f32(0.5, 0.25), [2]), "v": ("F32", f32(1.0), [1])}
    )
    # w rounds to the same bf16 values: unchanged; v moved by far more than bf16's step
    write_safetensors(
        tmp_path / "b" / "model.safetensors",
        {"w": ("BF16", bf16(0.5, 0.25), [2]), "v": ("BF16", bf16(1.5), [1])},
    )
    check = checks.weights_check(tmp_path / "a", tmp_path / "b")
    assert check.ok
    assert check.figures == {"tensors": 2, "changed": 1}


def test_weights_unchanged_fail(tmp_path: Path) -> None:
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
        write_safetensors(tmp_path / d / "model.safetensors", {"w": ("F32", f32(0.5), [1])})
    assert not checks.weights_check(tmp_path / "a", tmp_path / "b").ok


def test_checkpoint_names_what_is_missing(tmp_path: Path) -> None:
    actor = checks.checkpoint_dir(tmp_path, 2)
    (actor / "huggingface").mkdir(parents=True)
    (actor / "model_world_size_1_rank_0.pt").write_bytes(b"x")
    check = checks.checkpoint_check(actor)
    assert not check.ok
    assert check.summary.startswith("no optimizer, hf_weights in")
    (actor / "optim_world_size_1_rank_0.pt").write_bytes(b"x")
    (actor / "huggingface" / "model.safetensors").write_bytes(b"x")
    assert checks.checkpoint_check(actor).ok


def test_a_real_runs_output_passes_the_losses_and_sync_checks_and_reaches_checkpoint() -> None:
    lines = (FIXTURES / "smoke" / "main_ppo-steps.log").read_text().splitlines()
    p = feed_all(StepMetrics(steps=2), lines)
    assert p.stage == "checkpoint"
    assert checks.losses_check(p.metrics, 2).ok
    sync = checks.sync_check(p.metrics, 2, 1e-3)
    assert sync.ok
    assert sync.figures["1"] == pytest.approx(3.93e-5, rel=1e-2)
