"""diagnose on real logs from public threads (tests/fixtures/diagnose/SOURCES.md): the class, the
evidence line (file:line) and the figures each log printed; "unknown" on an unrelated failure."""

from __future__ import annotations

import io
import json
import os
import shutil
from pathlib import Path

import pytest

from verl_setup.cli import main_inner
from verl_setup.diagnose import scan
from verl_setup.diagnose.rules import triggers
from verl_setup.diagnose.sources import gather
from verl_setup.diagnose.verdict import Diagnosis, diagnose
from verl_setup.output import SCHEMA

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "diagnose"


def run(*names: str) -> Diagnosis:
    return diagnose(gather([FIXTURES / n for n in names], {}, system=False))


# file, class, evidence line, facts that must be read from the log
CASES = [
    ("ray-memory-monitor-verl-2950.log", "ray-memory-monitor", 1,
     {"pid": "4100606", "frac": "0.979583", "thr": "0.95", "used": "246.41", "total": "251.54"}),
    ("ray-memory-summary-easyr1-185.log", "ray-memory-monitor", 2, {"killed": "1", "ip": "10.95.143.76"}),
    ("kernel-oom-dmesg-tranx-41.txt", "kernel-oom", 2,
     {"pid": "25315", "process": "python3", "rss_gib": "30.0"}),
    ("kernel-cgroup-oom-reportportal-203.txt", "kernel-oom", 1, {"pid": "63214", "process": "uwsgi"}),
    ("kernel-oom-slurm-arjuna-52.err", "kernel-oom", 2, {"events": "1", "step": "StepId=191.batch"}),
    ("cuda-oom-trainer-verl-2828.log", "cuda-oom", 13,
     {"side": "trainer", "want": "13.91 GiB", "total": "79.11 GiB", "free": "8.85 GiB",
      "torch": "60.49 GiB"}),
    ("cuda-oom-rollout-verl-302.log", "cuda-oom", 12, {"side": "rollout"}),
    ("kv-cache-vllm-10439.log", "kv-cache-memory", 2, {"engine": "vLLM"}),
    ("kv-cache-sglang-4330.log", "kv-cache-memory", 1, {"engine": "SGLang"}),
    ("nccl-timeout-verl-5750.log", "nccl-timeout", 2,
     {"op": "_ALLGATHER_BASE", "numel_out": "823186976", "timeout_ms": "600000", "ranks_reporting": "0"}),
    ("nccl-timeout-verl-597.log", "nccl-timeout", 1,
     {"op": "ALLREDUCE", "seq": "1", "ranks_reporting": "1"}),
    ("nccl-timeout-llamafactory-7396.log", "nccl-timeout", 1, {"ranks_reporting": "0,3,4"}),
    ("nccl-connect-verl-726.log", "nccl-connect", 1,
     {"address": "169.254.0.1", "address_class": "link-local"}),
    ("nccl-connect-link-local-nccl-975.log", "nccl-connect", 4, {"address_class": "link-local"}),
    ("nccl-connect-routable-nccl-tests-166.log", "nccl-connect", 1,
     {"address": "10.0.0.2", "address_class": "routable"}),
    ("worker-died-verl-4921.log", "worker-died", 8, {"pid": "87687", "exit": "SYSTEM_ERROR"}),
    ("worker-died-verl-472.log", "worker-died", 1, {"pid": "27499"}),
    ("resource-wait-verl-2515.log", "resource-wait", 1, {"have": "8.0", "want": "16"}),
    ("resource-wait-efficientzero-44.log", "resource-wait", 1, {"demand": "{'GPU': 0.125, 'CPU': 0.5}"}),
    ("hydra-ttrl-24.log", "hydra", 1, {"key": "reward_model.reward_kwargs.n_samples_per_prompt"}),
    ("hydra-verl-4157.log", "hydra", 8, {"full": "actor_rollout_ref.actor.policy_loss.rollout_correction"}),
    ("hydra-grammar-recorded-1.3.2.log", "hydra", 1, {}),
    ("import-error-verl-6931.log", "import-error", 1, {"module": "megatron.bridge"}),
    ("import-error-flash-attn-neurips-12.log", "import-error", 3, {"symbol": "_ZN3c104cuda9SetDeviceEi"}),
]  # fmt: skip


@pytest.mark.parametrize(("name", "cls", "line", "facts"), CASES, ids=[c[0].rsplit(".", 1)[0] for c in CASES])
def test_real_log_names_its_class_line_and_figures(
    name: str, cls: str, line: int, facts: dict[str, str]
) -> None:
    d = run(name)
    assert d.verdict is not None
    assert d.cls == cls
    assert d.verdict.evidence[0].path.endswith(name)
    assert d.verdict.evidence[0].line == line
    assert {k: d.verdict.facts.get(k) for k in facts} == facts
    assert d.verdict.remedy


def test_every_class_has_a_real_log() -> None:
    from tests.unit.test_diagnose_accel import ACCEL_CASES  # noqa: PLC0415  # issue 35's classes
    from verl_setup.diagnose.rules import RULES  # noqa: PLC0415

    assert {r.id for r in RULES} <= {c[1] for c in CASES + ACCEL_CASES}
    assert len(CASES) >= 12


def test_remedies_name_verls_keys() -> None:
    assert "actor_rollout_ref.nccl_timeout" in " ".join(run("nccl-timeout-verl-5750.log").verdict.remedy)  # type: ignore[union-attr]
    trainer = " ".join(run("cuda-oom-trainer-verl-2828.log").verdict.remedy)  # type: ignore[union-attr]
    assert "ppo_micro_batch_size_per_gpu" in trainer
    assert "param_offload" in trainer
    assert "gpu_memory_utilization" in " ".join(run("cuda-oom-rollout-verl-302.log").verdict.remedy)  # type: ignore[union-attr]
    assert "verl-setup verify" in " ".join(run("import-error-verl-6931.log").verdict.remedy)  # type: ignore[union-attr]


def test_an_unrelated_failure_is_unknown_and_says_what_was_read() -> None:
    d = run("unrelated-verl-4308.log")
    assert d.verdict is None
    assert d.cls == "unknown"
    assert not d.others
    assert d.to_json()["read"][0]["lines"] == 8


def test_a_ray_session_names_the_dead_workers_own_traceback_from_its_err() -> None:
    d = run("ray-session-worker-died")
    assert d.cls == "worker-died"
    assert d.verdict is not None
    last = d.verdict.evidence[-1]
    assert last.path.endswith("-14500.err")
    assert last.line == 7
    assert last.text == "KeyError: 'rollout_batch'"
    assert "KeyError: 'rollout_batch'" in d.verdict.remedy[0]


def test_the_first_cause_outranks_its_symptoms(tmp_path: Path) -> None:
    # A rank's OOM leaves the others in an NCCL timeout and Ray reports a dead actor: the OOM is named.
    for name in ("nccl-timeout-verl-5750.log", "worker-died-verl-4921.log", "cuda-oom-trainer-verl-2828.log"):
        shutil.copy(FIXTURES / name, tmp_path / name)
    d = diagnose(gather([tmp_path], {}, system=False))
    assert d.cls == "cuda-oom"
    assert [f.cls for f in d.others] == ["nccl-timeout", "worker-died"]


def test_default_source_is_rays_session_latest_under_ray_tmpdir(tmp_path: Path) -> None:
    session = tmp_path / "ray" / "session_2026-12-01_19-21-19_000000_1"
    shutil.copytree(FIXTURES / "ray-session-worker-died" / "logs", session / "logs")
    (tmp_path / "ray" / "session_latest").symlink_to(session)
    d = diagnose(gather([], {"RAY_TMPDIR": str(tmp_path)}, system=False))
    assert d.cls == "worker-died"
    missing = diagnose(gather([], {"RAY_TMPDIR": str(tmp_path / "none")}, system=False))
    assert missing.cls == "unknown"
    assert "no Ray session at" in missing.notes[0]


def test_kernel_sources_dmesg_file_and_memory_events(tmp_path: Path) -> None:
    events = tmp_path / "memory.events"
    events.write_text("low 0\nhigh 0\nmax 12\noom 3\noom_kill 2\n")  # cgroup v2's documented keys
    d = diagnose(gather([events], {}, system=False, dmesg=FIXTURES / "kernel-oom-dmesg-tranx-41.txt"))
    assert d.cls == "kernel-oom"
    assert d.verdict is not None
    assert d.verdict.facts["oom_kill"] == "2"
    assert d.verdict.facts["pid"] == "25315"


def test_lines_across_chunk_boundaries_keep_their_numbers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scan, "CHUNK", 64)
    log = tmp_path / "driver.log"
    filler = [f"step {i} loss 0.{i:04d} reward ok" for i in range(500)]
    hit = "socketStartConnect: Connect to 127.0.0.1<40815> failed : Connection refused"
    log.write_text("\n".join([*filler[:333], hit, *filler[333:]]))  # no final newline
    d = diagnose(gather([log], {}, system=False))
    assert d.verdict is not None
    assert d.verdict.evidence[0].line == 334
    assert d.verdict.facts["address_class"] == "loopback"
    assert d.scans[0].lines == 501


def test_a_line_without_newlines_is_cut_not_held(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scan, "CHUNK", 4096)
    log = tmp_path / "progress.log"
    log.write_bytes(b"\r" + b"=" * 300_000 + b"\nModuleNotFoundError: No module named 'vllm'\n")
    d = diagnose(gather([log], {}, system=False))
    assert d.cls == "import-error"
    assert d.verdict is not None
    assert d.verdict.facts["module"] == "vllm"


def test_a_fifo_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.log"
    os.mkfifo(fifo)
    result = scan.scan_file(fifo, triggers())
    assert result.error is not None
    assert "not a regular file" in result.error


def test_one_rule_keeps_at_most_per_rule_lines_but_counts_all(tmp_path: Path) -> None:
    log = tmp_path / "many.log"
    line = (FIXTURES / "nccl-timeout-verl-597.log").read_text().splitlines()[0]
    log.write_text("\n".join([line] * 5000) + "\n")
    result = scan.scan_file(log, triggers())
    assert len(result.hits["nccl_timeout"]) == scan.PER_RULE
    assert result.counts["nccl_timeout"] == 5000


def test_cli_json_uses_the_envelope(capsys: pytest.CaptureFixture[str]) -> None:
    assert main_inner(["diagnose", "--no-system", "--json", str(FIXTURES / "nccl-connect-verl-726.log")]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["schema"], doc["command"], doc["ok"]) == (SCHEMA, "diagnose", True)
    data = doc["data"]
    assert data["class"] == "nccl-connect"
    assert data["verdict"]["evidence"][0]["line"] == 1


def test_cli_missing_path_is_bad_input() -> None:
    from verl_setup.cli import main  # noqa: PLC0415

    err = io.StringIO()
    import contextlib  # noqa: PLC0415

    with contextlib.redirect_stderr(err):
        assert main(["diagnose", "--no-system", "/nonexistent/run.log"]) == 2
    assert err.getvalue().count("\n") == 1


def test_doctor_points_to_diagnose_when_a_launch_already_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    session = tmp_path / "ray" / "session_1"
    shutil.copytree(FIXTURES / "ray-session-worker-died" / "logs", session / "logs")
    main_inner(["doctor", "--check", "memory"])
    assert "hint:" not in capsys.readouterr().out  # no session_latest yet: nothing to point at
    (tmp_path / "ray" / "session_latest").symlink_to(session)
    main_inner(["doctor", "--check", "memory"])
    assert f"`verl-setup diagnose {session.parent / 'session_latest'}`" in capsys.readouterr().out
    main_inner(["doctor", "--check", "memory", "--json"])
    assert "verl-setup diagnose" in json.loads(capsys.readouterr().out)["data"]["diagnose_hint"]
