"""diagnose on a large synthetic Ray session folder: seconds and peak memory.

    python bench/diagnose.py [--gib 1.0] [--dir DIR]

Writes a session (driver log, raylet.out, 64 worker .out/.err pairs) of about --gib GiB of
verl-like log lines, with a CUDA OOM traceback near the end of one worker's .err and NCCL
timeouts in the others, then times `diagnose` on it in a fresh process and reports its peak RSS
(ru_maxrss of the child). The folder is removed afterwards unless --dir is given.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FILLER = (
    "(WorkerDict pid={pid}, ip=10.0.0.{node}) step:{step} - actor/pg_loss:0.0123 actor/entropy:0.613 "
    "critic/score/mean:0.4375 response_length/mean:612.5 timing_s/gen:41.27 perf/throughput:1843.2\n"
)
OOM = Path(__file__).resolve().parents[1] / "tests/fixtures/diagnose/cuda-oom-trainer-verl-2828.log"
TIMEOUT = Path(__file__).resolve().parents[1] / "tests/fixtures/diagnose/nccl-timeout-verl-5750.log"


def write_session(root: Path, total: int) -> None:
    logs = root / "logs"
    logs.mkdir(parents=True)
    files = [logs / "raylet.out", logs / "job-driver-raysubmit_1.log"]
    files += [
        logs / f"worker-{i:056x}-01000000-{7000 + i}.{kind}" for i in range(64) for kind in ("out", "err")
    ]
    per_file = total // len(files)
    for index, path in enumerate(files):
        block = "".join(FILLER.format(pid=7000 + index, node=index % 8, step=s) for s in range(2000)).encode()
        with path.open("wb") as out:
            written = 0
            while written < per_file:
                out.write(block)
                written += len(block)
            if path.name.endswith("-7003.err"):
                out.write(OOM.read_bytes())
            elif path.suffix == ".err":
                out.write(TIMEOUT.read_bytes())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gib", type=float, default=1.0)
    parser.add_argument("--dir", type=Path)
    args = parser.parse_args()
    root = args.dir or Path(tempfile.mkdtemp(prefix="verl-diagnose-bench-"))
    try:
        session = root / "session_bench"
        start = time.monotonic()
        write_session(session, int(args.gib * 2**30))
        size = sum(f.stat().st_size for f in session.rglob("*") if f.is_file())
        print(f"wrote {size / 2**30:.2f} GiB in {time.monotonic() - start:.1f} s", file=sys.stderr)
        start = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "verl_setup", "diagnose", "--no-system", "--json", str(session)],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        seconds = time.monotonic() - start
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        peak_mib = usage.ru_maxrss / 1024
        if done.returncode != 0:
            sys.exit(f"diagnose exited {done.returncode}: {done.stderr.strip()[-2000:]}")
        verdict = json.loads(done.stdout)["data"]  # the JSON envelope: the result is under data
        report = {
            "bytes": size,
            "seconds": round(seconds, 2),
            "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 2),
            "peak_rss_mib": round(peak_mib, 1),
            "class": verdict["class"],
            "evidence": verdict["verdict"]["evidence"][0],
        }
        print(json.dumps(report, indent=2))
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
