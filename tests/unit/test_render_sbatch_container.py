"""verl.sbatch with `--container`: every Ray and verl step runs in the image (apptainer exec --nv,
or srun --container-image for pyxis), the image name a single word whatever it holds. The
rendered script runs under bash with stand-ins for srun, scontrol, apptainer, ray and the
Python, which record their argv; real Slurm runs in tests/integration/test_cluster_slurm.py."""

from __future__ import annotations

import json
import stat
import subprocess
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.render_scenarios import HOSTILE_IMAGE, SCENARIOS, render_scenario

RECORD = """#!/usr/bin/env python3
import json, os, sys
with open(os.environ["ARGV_LOG"], "a") as log:
    log.write(json.dumps([os.path.basename(sys.argv[0]), *sys.argv[1:]]) + "\\n")
"""
# srun: record, then run the step's command (after srun's own options); `hostname` answers.
SRUN = (
    RECORD
    + """args = sys.argv[1:]
while args and args[0].startswith("-"):
    args = args[2:] if args[0] == "-w" else args[1:]
if args[:1] == ["hostname"]:
    print("127.0.0.1")
elif args:
    os.execvp(args[0], args)
"""
)
# apptainer exec --nv --bind DIR IMAGE COMMAND...: record, then run COMMAND.
APPTAINER = (
    RECORD
    + """args = sys.argv[2:]
while args[0].startswith("-"):
    args = args[2:] if args[0] == "--bind" else args[1:]
os.execvp(args[1], args[1:])
"""
)
SCONTROL = RECORD + 'print("node1\\nnode2")\n'


def run_sbatch(tmp_path: Path, scenario_name: str) -> list[list[str]]:
    (scenario,) = [s for s in SCENARIOS if s.name == scenario_name]
    (sbatch,) = render_scenario(scenario, ("slurm",))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in (
        ("srun", SRUN), ("scontrol", SCONTROL), ("apptainer", APPTAINER),
        ("ray", RECORD), ("python-stand-in", RECORD), ("sleep", RECORD),
    ):  # fmt: skip
        (bin_dir / name).write_text(body)
        (bin_dir / name).chmod(0o755 | stat.S_IXUSR)
    script = tmp_path / "job dir" / "verl.sbatch"
    script.parent.mkdir()
    script.write_text(sbatch.content)
    log = tmp_path / "argv.jsonl"
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "ARGV_LOG": str(log),
        "SLURM_JOB_NODELIST": "node[1-2]",
        "SLURM_NNODES": "2",
        "SLURM_SUBMIT_DIR": str(script.parent),
        "VERL_PYTHON": "python-stand-in",
    }
    done = subprocess.run(
        ["bash", str(script), "trainer.total_epochs=1"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert not list(tmp_path.glob("**/pwned*"))
    return [json.loads(line) for line in log.read_text().splitlines()]


@pytest.mark.subprocess
def test_apptainer_wraps_ray_the_join_check_and_verl_with_the_image_as_one_word(tmp_path: Path) -> None:
    calls = run_sbatch(tmp_path, "hostile")
    wrapped = [c for c in calls if c[0] == "apptainer"]
    assert len(wrapped) == 4  # the head's ray, one worker's ray, the join check, verl
    job_dir = str(tmp_path / "job dir")
    for call in wrapped:
        assert call[1:6] == ["exec", "--nv", "--bind", job_dir, HOSTILE_IMAGE]
    ray = [c for c in calls if c[0] == "ray"]
    # Both run in the background: either may log first.
    assert sorted(c[1:3] for c in ray) == [["start", "--address=127.0.0.1:6379"], ["start", "--head"]]
    (verl,) = [c for c in calls if c[0] == "python-stand-in" and "-m" in c]
    assert verl[-1] == "trainer.total_epochs=1"


@pytest.mark.subprocess
def test_pyxis_gives_each_ray_and_verl_step_the_container_image(tmp_path: Path) -> None:
    calls = run_sbatch(tmp_path, "h200-drv580-py312-vllm")
    steps = [c for c in calls if c[0] == "srun"]
    image = "--container-image=nvcr.io#verl-setup/verl:h200"
    assert image not in steps[0]  # `hostname --ip-address` runs on the node itself
    assert len(steps) == 5  # hostname, then the head, the worker, the join check, verl
    assert all(image in s for s in steps[1:])
    assert all(f"--container-mounts={tmp_path / 'job dir'}:{tmp_path / 'job dir'}" in s for s in steps[1:])
    assert not [c for c in calls if c[0] == "apptainer"]


@pytest.mark.subprocess  # planning detects this machine
def test_a_container_option_of_another_kind_is_one_line_exit_2(tmp_path: Path) -> None:
    for bad in ("docker:verl:latest", "apptainer:", "verl.sif"):
        result = run_cli("render", "slurm", "--no-gpu", "--out", str(tmp_path), "--container", bad)
        assert result.code == 2
        assert result.err.count("\n") == 1
        assert "give apptainer:IMAGE.sif (apptainer exec --nv) or pyxis:IMAGE" in result.err
