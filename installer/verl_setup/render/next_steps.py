"""The line to type after `render`: how to build or run each file it wrote (on stderr, so the
file list on stdout stays a list)."""

from __future__ import annotations

import shlex
from pathlib import Path

from verl_setup.plan.select import Plan
from verl_setup.render.templates import RenderOptions

LAUNCH = "python3 -m verl.trainer.main_ppo ..."


def after_render(targets: tuple[str, ...], out: Path, plan: Plan, options: RenderOptions) -> list[str]:
    """One or two lines per target: build, then run (kuberay's image: render_warnings)."""
    folder = shlex.quote(str(out))
    image = shlex.quote(options.image or f"verl-setup/{plan.row.id}:latest")
    lines: dict[str, list[str]] = {
        "venv": [f"bash {folder}/setup-venv.sh --venv .venv   (then: source .venv/bin/activate)"],
        "docker": [
            f"docker build -t {image} {folder}",
            f"docker run --gpus all --rm -it {image} {LAUNCH}",
        ],
        "apptainer": [
            f"cd {folder} && apptainer build verl.sif verl.def",
            f"apptainer run --nv verl.sif {LAUNCH}",
        ],
        "env": [f"source {folder}/env.sh   (on every node, before `ray start`)"],
        "ray": [
            f"{folder}/ray-head.sh   (on the head), then {folder}/ray-worker.sh HEAD_IP   (on each worker)"
        ],
        "slurm": [f"sbatch {folder}/verl.sbatch [key=value overrides for verl.trainer.main_ppo]"],
        "kuberay": [
            f"kubectl apply -f {folder}/raycluster.yaml"
            + (f"   (or the one-shot job: kubectl apply -f {folder}/rayjob.yaml)" if options.job else ""),
        ],
        "uv-project": [f"cd {folder} && uv sync --locked && uv run {LAUNCH.replace('python3 ', 'python ')}"],
    }
    picked = [line for t in targets for line in lines.get(t, [])]
    return ["next:", *(f"  {line}" for line in picked)] if picked else []


def render_warnings(plan: Plan, options: RenderOptions) -> list[str]:
    """What `plan` warns about for this row and target, and what the files cannot do yet."""
    out = list(plan.warnings)
    if "kuberay" in options.targets and not options.image:
        image = options.image or f"verl-setup/{plan.row.id}:latest"
        out.append(
            f"raycluster.yaml names the image {image}, which no registry has: build and push it first "
            "(render docker, docker build, docker push), then render again with --image REGISTRY/NAME:TAG"
        )
    return out
