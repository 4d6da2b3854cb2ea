"""diagnose on real logs from public threads (tests/fixtures/diagnose/SOURCES.md): the class, the
evidence line (file:line) and the figures each log printed; "unknown" on an unrelated failure."""

from __future__ import annotations

import io
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from verl_setup.cli import main_inner
from verl_setup.diagnose import scan
from verl_setup.diagnose.rules import triggers
from verl_setup.diagnose.sources import gather
from verl_setup.diagnose.verdict import Diagnosis, diagnose
from verl_setup.output import SCHEMA

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "diagnose"
# diagnose finds candidate lines with grep -F (one pass); each test here runs it for real.
pytestmark = pytest.mark.subprocess


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
    ("ray-gcs-tinyzero-75.log", "ray-gcs", 2, {"address": "172.23.15.13:20000"}),
    ("ray-gcs-empty-host-mm-eureka-54.log", "ray-gcs", 4, {"address": ":6379", "empty_host": "yes"}),
    ("hccl-init-vllm-ascend-2712.log", "hccl-init", 2, {"code": "1"}),
    ("hccl-init-vllm-ascend-672.log", "hccl-init", 1, {"code": "15"}),
    ("gpu-memory-busy-vllm-omni-276.log", "gpu-memory-busy", 1,
     {"free": "0.49", "total": "79.32", "util": "0.6", "want": "47.59"}),
    ("gpu-memory-busy-vllm-33297.log", "gpu-memory-busy", 1, {"device": "cuda:0", "free": "1.53"}),
    ("nccl-system-error-segmenter-60.log", "nccl-error", 1, {"nccl": "2.7.8"}),
    ("nccl-socketpollconnect-nccl-1618.log", "nccl-connect", 1,
     {"address": "172.16.30.229", "port": "39953", "address_class": "routable"}),
    ("kv-cache-max-seq-len-qwen-295.log", "kv-cache-memory", 2, {"max_len": "32768", "kv_tokens": "7344"}),
    ("kv-cache-v1-vllm-34076.log", "kv-cache-memory", 1,
     {"max_len": "262144", "needed": "24.0", "available": "3.18", "fits": "34736"}),
    ("crash-sigfpe-toolrl-26.log", "crash-signal", 2,
     {"signal": "SIGFPE", "name": "WorkerDict", "pid": "14361",
      "python_frame": "vllm.model_executor.layers.vocab_parallel_embedding:40"}),
    ("crash-sigsegv-verl-3212.log", "crash-signal", 3,
     {"signal": "SIGSEGV", "name": "WorkerDict", "pid": "19254", "symbol": "cudaMemcpyAsync"}),
    ("crash-sigabrt-watchdog-verl-2995.log", "crash-signal", 2,
     {"signal": "SIGABRT", "pid": "833", "symbol": "pthread_kill"}),
    ("crash-sigbus-verl-3218.log", "crash-signal", 1,
     {"signal": "SIGBUS", "name": "TaskRunner", "pid": "280930"}),
    ("resource-wait-placement-group-aibrix-927.log", "resource-wait", 1, {"waited": "30"}),
    ("resource-wait-vllm-gpus-7107.log", "resource-wait", 2, {}),
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

    assert {r.id for r in RULES if r.tier < 2} <= {c[1] for c in CASES + ACCEL_CASES}
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


# Real failures no class covers (kernel bugs, verl's own bugs): diagnose must name no cause.
UNRELATED = [
    "unrelated-verl-4308.log",
    "unrelated-illegal-memory-sglang-verl-2965.log",
    "unrelated-illegal-memory-verl-1611.log",
]


@pytest.mark.parametrize("name", UNRELATED)
def test_real_failures_of_no_known_class_are_unknown(name: str) -> None:
    d = run(name)
    assert d.verdict is None
    assert d.cls == "unknown"
    assert not d.others


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


def _same(d: Diagnosis) -> dict[str, object]:
    data = d.to_json()
    data.pop("seconds")
    return data


@pytest.mark.parametrize("name", [c[0] for c in CASES] + [*UNRELATED, "ray-session-worker-died"])
def test_grep_and_the_python_scan_give_the_same_diagnosis(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Fixtures are small (the scan searches them itself): make every file go through grep once.
    monkeypatch.setattr(scan, "GREP_MIN", 0)
    calls: list[str] = []
    real = scan._grep_scan

    def counted(*a: Any) -> Any:
        calls.append("grep")
        return real(*a)

    monkeypatch.setattr(scan, "_grep_scan", counted)
    with_grep = _same(run(name))
    assert calls
    monkeypatch.setattr(scan, "_grep", lambda: None)
    assert _same(run(name)) == with_grep


def test_a_failing_grep_falls_back_to_the_python_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    # sh given grep's flags refuses them (exit 2): the scan reads the file itself.
    monkeypatch.setattr(scan, "GREP_MIN", 0)
    monkeypatch.setattr(scan, "_grep", lambda: shutil.which("sh"))
    d = run("cuda-oom-trainer-verl-2828.log")
    assert d.cls == "cuda-oom"
    assert d.verdict is not None
    assert d.verdict.evidence[0].line == 13


@pytest.fixture
def deep_root(tmp_path: Path) -> Iterator[Path]:
    """tmp_path, emptied from the bottom up afterwards (pytest's rmtree recurses once per level)."""
    yield tmp_path
    bottom = tmp_path
    while (bottom / "d").is_dir():
        bottom = bottom / "d"
    while bottom != tmp_path:
        for f in bottom.iterdir():
            f.unlink()
        bottom.rmdir()
        bottom = bottom.parent


def _deep(root: Path, levels: int) -> Path:
    for _ in range(levels):  # not os.makedirs: it recurses once per level too
        root = root / "d"
        root.mkdir()
    return root


def test_a_folder_1500_levels_deep_is_walked_without_recursion(deep_root: Path) -> None:
    tmp_path = deep_root
    # G1: os.walk recursed once per level on Python 3.10/3.11 and raised RecursionError.
    shutil.copy(FIXTURES / "nccl-connect-verl-726.log", tmp_path / "driver.log")
    deep = _deep(tmp_path, 1500)
    (deep / "worker.err").write_text("nothing\n")
    d = diagnose(gather([tmp_path], {}, system=False))
    assert d.cls == "nccl-connect"
    assert any("levels deep were not read" in n for n in d.notes)


def test_report_log_on_a_deep_folder_does_not_crash(
    deep_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _deep(deep_root, 1500)
    assert main_inner(["report", "--log", str(deep_root)]) == 0
    assert "Failed run" in capsys.readouterr().out


def test_a_binary_file_beside_the_log_is_skipped_unread(tmp_path: Path) -> None:
    # G2: a checkpoint beside a one-line log was read as a log (66 s for 5 GB).
    shutil.copy(FIXTURES / "import-error-verl-6931.log", tmp_path / "train.log")
    ckpt = tmp_path / "model.safetensors"
    with ckpt.open("wb") as out:  # safetensors: an 8-byte little-endian header length, then JSON
        out.write((64).to_bytes(8, "little") + b'{"w":{"dtype":"BF16"}}'.ljust(64) + b"\0\x3f" * 4096)
        out.seek(6 << 30)  # a sparse 6 GiB file: reading it would take a minute
        out.write(b"\0")
    d = diagnose(gather([tmp_path], {}, system=False))
    assert d.cls == "import-error"
    ckpt_read = next(r for r in d.to_json()["read"] if r["path"].endswith(".safetensors"))
    assert "binary" in ckpt_read["skipped"]
    assert d.seconds < 5


def test_a_log_truncated_while_open_is_still_read(tmp_path: Path) -> None:
    log = tmp_path / "rotated.log"  # copytruncate leaves NULs where the old lines were
    hit = (FIXTURES / "nccl-connect-verl-726.log").read_bytes()
    log.write_bytes(b"\0" * 20000 + hit + b"step 2 loss 0.1\n" * 1000)
    assert run_path(log).cls == "nccl-connect"


def run_path(path: Path) -> Diagnosis:
    return diagnose(gather([path], {}, system=False))


def test_bytes_read_are_bounded_and_a_large_log_is_read_from_its_end(tmp_path: Path) -> None:
    log = tmp_path / "huge.log"
    oom = (FIXTURES / "cuda-oom-trainer-verl-2828.log").read_bytes()
    log.write_bytes(b"step 1 loss 0.1\n" * 100_000 + oom)
    other = tmp_path / "z-later.log"
    other.write_bytes(oom)
    d = diagnose(gather([log, other], {}, system=False), max_bytes=len(oom) + 1000)
    assert d.cls == "cuda-oom"
    first = d.to_json()["read"][0]
    assert first["from_byte"] == log.stat().st_size - len(oom) - 1000
    assert any("read its last" in n for n in d.notes)
    assert any("1 file(s) not read" in n for n in d.notes)


def test_the_dead_actors_pid_not_the_catching_tasks() -> None:
    # Search-R1#45: `RayTaskError(ActorDiedError): ray::main_task() (pid=109108, ...)` caught it; the
    # actor block below names the dead WorkerDict, pid 110142.
    d = run("worker-died-main-task-pid-search-r1-45.log")
    assert d.cls == "worker-died"
    assert d.verdict is not None
    assert d.verdict.facts["pid"] == "110142"
    assert "(pid 110142)" in d.verdict.summary


def test_a_global_rank_prefix_is_the_reporter_not_a_silent_rank() -> None:
    # NCCL#1610: `[rank15]:[E218 ...] [Rank 1] Watchdog ...`: rank 15 reports, as rank 1 of its group.
    d = run("nccl-timeout-global-rank-nccl-1610.log")
    assert d.verdict is not None
    assert d.verdict.facts["ranks_reporting"] == "13,15"
    assert "ranks_silent" not in d.verdict.facts
    assert "did not" not in d.verdict.summary


def test_a_first_collective_that_never_completed_gets_connection_advice() -> None:
    # verl#597: SeqNum=1, an ALLREDUCE of 1 element, "last completed NCCL work: -1".
    d = run("nccl-timeout-verl-597.log")
    assert d.verdict is not None
    assert d.verdict.facts["first_collective"] == "never completed"
    remedy = " ".join(d.verdict.remedy)
    assert "doctor --check collective" in remedy
    assert "NCCL_SOCKET_IFNAME" in remedy
    assert "nccl_timeout" not in remedy
    assert "never connected" in d.verdict.summary


def test_rays_k8s_memory_hint_names_the_pod_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    # Agent-R1#33: "The worker may have exceeded K8s pod memory limits."
    from verl_setup.diagnose import explain_cluster  # noqa: PLC0415

    monkeypatch.setattr(explain_cluster, "cgroup_limit", lambda: (64 * 2**30, "/sys/fs/cgroup/memory.max"))
    d = run("worker-died-k8s-agent-r1-33.log")
    assert d.cls == "worker-died"
    assert d.verdict is not None
    assert d.verdict.facts["k8s_memory_hint"] == "yes"
    assert "pod's memory limit" in d.verdict.summary
    remedy = " ".join(d.verdict.remedy)
    assert "resources.limits.memory" in remedy
    assert "64.0 GiB (/sys/fs/cgroup/memory.max)" in remedy


def test_a_crash_names_the_library_at_the_top_of_a_native_stack() -> None:
    from verl_setup.diagnose.explain_runtime import crash_signal  # noqa: PLC0415
    from verl_setup.diagnose.scan import Hit  # noqa: PLC0415

    # The signal line of verl#2995, then a native frame as Ray prints one with its library (verl#597).
    hit = Hit(
        rule="crash_signal", path="worker.err", number=1,
        text=(FIXTURES / "crash-sigabrt-watchdog-verl-2995.log").read_text().splitlines()[1],
        after=(
            "(WorkerDict pid=230966)  /data1/jzshen/miniconda3/envs/searchr1/lib/python3.9/site-packages/ray/"
            "_raylet.so(+0x13aa8ea) [0x7f58dc4ec8ea] ray::operator<<()",
        ),
    )  # fmt: skip
    finding = crash_signal([hit])
    assert finding.facts["library"] == "_raylet.so"
    assert "_raylet.so" in finding.summary


def test_an_abort_names_the_library_of_the_stack_printed_above_it() -> None:
    """An abort follows the stack of what threw (Ray's terminate handler prints it, then abseil the
    SIGABRT): the library named is the first past the handler's and the C++ runtime's frames."""
    from verl_setup.diagnose.explain_runtime import crash_signal  # noqa: PLC0415
    from verl_setup.diagnose.scan import Hit  # noqa: PLC0415

    raylet = "/data1/jzshen/miniconda3/envs/searchr1/lib/python3.9/site-packages/ray/_raylet.so"
    cxx = "/data1/jzshen/miniconda3/envs/searchr1/bin/../lib/libstdc++.so.6"
    # verl#597's "Stack trace:" block as the thread prints it (its last line cut there), above
    # verl#2995's SIGABRT line (the order vllm#5458 shows: the stack, then the signal).
    before = (
        "(WorkerDict pid=230966) [2025-03-14 14:33:45,211 E 230966 231591] logging.cc:120: Stack trace: ",
        f"(WorkerDict pid=230966)  {raylet}(+0x13aa8ea) [0x7f58dc4ec8ea] ray::operator<<()",
        f"(WorkerDict pid=230966) {raylet}(+0x13ae022) [0x7f58dc4f0022] ray::TerminateHandler()",
        f"(WorkerDict pid=230966) {cxx}(+0xb135a) [0x7f58dadc635a] __cxxabiv1::__terminate()",
        f"(WorkerDict pid=230966) {cxx}(+0xb13c5) [0x7f58dadc63c5]",
        f"(WorkerDict pid=230966) {cxx}(+0xb134f) [0x7f58dadc634f]",
        "(WorkerDict pid=230966) /data1/jzshen/miniconda3/envs/searchr1/lib/python3.9/site-packages/"
        "torch/lib/libtorch_cuda.so(+0xe5ab35) [0x",
        "(WorkerDict pid=230966) ",
    )
    hit = Hit(
        rule="crash_signal", path="worker.err", number=9,
        text=(FIXTURES / "crash-sigabrt-watchdog-verl-2995.log").read_text().splitlines()[1], before=before,
    )  # fmt: skip
    finding = crash_signal([hit])
    assert finding.facts["library"] == "libtorch_cuda.so"
    assert "the top of its stack is libtorch_cuda.so" in finding.summary
    # Only the handler's frames above: its library, rather than nothing.
    assert crash_signal([Hit(**{**hit.__dict__, "before": before[:3]})]).facts["library"] == "_raylet.so"
    # A stack further up than a few lines is another story: not named.
    far = (*before, *("(WorkerDict pid=230966) INFO step 3",) * 8)
    assert "library" not in crash_signal([Hit(**{**hit.__dict__, "before": far})]).facts


def test_a_crash_signal_outranks_the_dead_worker_it_explains(tmp_path: Path) -> None:
    for name in ("crash-sigfpe-toolrl-26.log", "worker-died-verl-4921.log"):
        shutil.copy(FIXTURES / name, tmp_path / name)
    d = diagnose(gather([tmp_path], {}, system=False))
    assert d.cls == "crash-signal"
    assert [f.cls for f in d.others] == ["worker-died"]


def test_a_cuda_oom_with_micro_batch_1_does_not_advise_a_smaller_one() -> None:
    # verl#1141: the launch (as posted) sets ppo_micro_batch_size_per_gpu=1; its model path is a
    # shell variable, so the planner says what it lacks.
    d = run("cuda-oom-launch-verl-1141.log")
    assert d.cls == "cuda-oom"
    assert d.verdict is not None
    remedy = " ".join(d.verdict.remedy)
    assert "already 1" in remedy
    assert "lower actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu" not in remedy
    assert "doctor --check fit" in remedy
    assert d.verdict.facts["micro_batch"] == "1"
    assert d.verdict.facts["side"] == "unknown"  # the launch's critic.* keys name no frame


def test_a_cuda_oom_runs_the_planner_on_the_runs_launch(tmp_path: Path) -> None:
    # The same launch with its model path pointing at a readable copy of the model's config.json.
    model = Path(__file__).resolve().parents[1] / "fixtures" / "memory" / "Llama-3.2-3B"
    text = (FIXTURES / "cuda-oom-launch-verl-1141.log").read_text().replace("$llama3b_path", str(model))
    log = tmp_path / "run.log"
    log.write_text(text)
    d = diagnose(gather([log], {}, system=False))
    assert d.verdict is not None
    assert d.verdict.facts["planner_verdict"] == "does-not-fit"
    remedy = " ".join(d.verdict.remedy)
    assert "training-memory planner on this run's launch (estimate)" in remedy
    assert "smallest changes that fit" in remedy
    assert "param_offload=True" in remedy


def test_the_launch_line_is_context_not_a_verdict(tmp_path: Path) -> None:
    log = tmp_path / "ok.log"
    log.write_text("+ python3 -m verl.trainer.main_ppo trainer.n_gpus_per_node=8\nstep 1 loss 0.1\n")
    assert diagnose(gather([log], {}, system=False)).cls == "unknown"


def test_a_log_over_a_mib_goes_through_grep_with_its_line_numbers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "driver.log"
    oom = (FIXTURES / "cuda-oom-trainer-verl-2828.log").read_bytes()
    log.write_bytes(b"step 1 loss 0.1\n" * 100_000 + oom + b"step 2 loss 0.1\n" * 10)
    used: list[int] = []
    real = scan._grep_scan

    def counted(*a: Any) -> Any:
        used.append(1)
        return real(*a)

    monkeypatch.setattr(scan, "_grep_scan", counted)
    d = run_path(log)
    assert used
    assert d.verdict is not None
    assert d.verdict.evidence[0].line == 100_000 + 13
    assert d.scans[0].lines == 100_000 + oom.count(b"\n") + 10


def test_many_binary_files_make_one_note_not_thousands(tmp_path: Path) -> None:
    for i in range(30):
        (tmp_path / f"shard-{i}.bin").write_bytes(b"\0\x01" * 100)
    d = run_path(tmp_path)
    assert len([n for n in d.notes if "binary" in n]) == 6
    assert len(d.to_json()["read"]) == 30


_OOM_LINES = (FIXTURES / "cuda-oom-trainer-verl-2828.log").read_bytes().rstrip(b"\n").count(b"\n") + 1


def _session_of_many(root: Path) -> list[Path]:
    """Forty worker logs (more than one grep batch), one with verl#2828's OOM and no final newline,
    one whose name holds a newline (grep and wc lines cannot carry it: it goes alone)."""
    oom = (FIXTURES / "cuda-oom-trainer-verl-2828.log").read_bytes()
    paths = []
    for i in range(40):
        name = f"worker-{i:02d}.err" if i != 7 else "worker-07\nodd.err"
        body = b"step 1 loss 0.1\n" * (50 + i) + (oom.rstrip(b"\n") if i in (3, 7) else b"")
        (root / name).write_bytes(body)
        paths.append(root / name)
    return paths


def test_many_files_through_grep_in_batches_read_as_each_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = _session_of_many(tmp_path)
    triggers_ = triggers()
    monkeypatch.setattr(scan, "GREP_MIN", 0)
    runs: list[int] = []
    real = scan._grep_scan

    def counted(grep: str, items: list[Any], t: Any) -> bool:
        runs.append(len(items))
        return bool(real(grep, items, t))

    monkeypatch.setattr(scan, "_grep_scan", counted)
    batched = scan.scan_files([(p, None) for p in paths], triggers_, workers=2)
    assert sorted(runs) == [1, 19, 20]  # 39 by name in one batch per worker; the odd name alone
    monkeypatch.setattr(scan, "_grep", lambda: None)
    alone = [scan.scan_file(p, triggers_) for p in paths]
    assert [(s.path, s.lines, s.counts) for s in batched] == [(s.path, s.lines, s.counts) for s in alone]
    assert batched[3].lines == 53 + _OOM_LINES  # the unfinished last line counts
    assert [h.number for h in batched[3].hits["cuda_oom"]] == [h.number for h in alone[3].hits["cuda_oom"]]
    assert batched[7].hits
    assert batched[3].hits
    assert not batched[4].hits


def test_a_failing_grep_on_a_batch_falls_back_to_reading_each_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = _session_of_many(tmp_path)
    monkeypatch.setattr(scan, "GREP_MIN", 0)
    monkeypatch.setattr(scan, "_grep", lambda: shutil.which("sh"))  # refuses grep's flags (exit 2)
    scans = scan.scan_files([(p, None) for p in paths], triggers(), workers=2)
    assert [s.error for s in scans] == [None] * 40
    assert scans[3].lines == 53 + _OOM_LINES
    assert scans[3].hits["cuda_oom"]
