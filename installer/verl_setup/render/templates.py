"""Render a Plan into files through the one Jinja environment: scripts, Dockerfile, Apptainer
definition, env, Ray, Slurm, KubeRay, a uv project. Values from users or hosts reach every file only
through the quoting filters."""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from verl_setup import __version__
from verl_setup.environment.uv import ROW_DECIDES
from verl_setup.errors import BadInputError
from verl_setup.plan.recipe import build_recipe
from verl_setup.plan.select import Plan
from verl_setup.plan.steps import Choice, Recipe
from verl_setup.plan.user_packages import UserPackages
from verl_setup.render import quoting
from verl_setup.render.accelerator import accelerator_values
from verl_setup.render.uv_project import Project, project
from verl_setup.render.values import ContainerSpec, EnvVar, environment, forward_compat, nvidia_require_cuda
from verl_setup.scripts import script_text
from verl_setup.util.paths import data_dir
from verl_setup.util.tokens import IMAGE
from verl_setup.util.versions import minor_of
from verl_setup.util.vocab import RENDER_TARGETS, suggest

# Target -> (template, output file name, executable).
TARGETS: dict[str, tuple[tuple[str, str, bool], ...]] = {
    "venv": (("setup-venv.sh.jinja", "setup-venv.sh", True),),
    "docker": (
        ("Dockerfile.jinja", "Dockerfile", False),
        ("dockerignore.jinja", ".dockerignore", False),
        ("verl-setup-probe.py.jinja", "verl-setup-probe.py", False),
    ),
    "apptainer": (
        ("verl.def.jinja", "verl.def", False),
        ("verl-setup-probe.py.jinja", "verl-setup-probe.py", False),
    ),
    "env": (("env.sh.jinja", "env.sh", False), ("env.list.jinja", "env.list", False)),
    "ray": (
        ("ray-head.sh.jinja", "ray-head.sh", True),
        ("ray-worker.sh.jinja", "ray-worker.sh", True),
        ("runtime_env.yaml.jinja", "runtime_env.yaml", False),
    ),
    "slurm": (("verl.sbatch.jinja", "verl.sbatch", True),),
    "kuberay": (
        ("raycluster.yaml.jinja", "raycluster.yaml", False),
        ("rayjob.yaml.jinja", "rayjob.yaml", False),
    ),
    # uv.lock comes from `uv lock` on these (render/uv_project.py), in the render command.
    "uv-project": (
        ("pyproject.toml.jinja", "pyproject.toml", False),
        ("python-version.jinja", ".python-version", False),
    ),
}
# `all` renders every target but these, which resolve with uv (network, and seconds to minutes).
RESOLVING = ("uv-project",)
UV_VERSION = "0.13.9"  # the uv the rendered scripts install when the machine has none
CA_FILE = "ca-bundle.crt"

Status = Literal["create", "unchanged", "changed", "overwrite"]


@dataclass(frozen=True, kw_only=True)
class RenderOptions:
    """Everything besides the Plan that shapes the files."""

    targets: tuple[str, ...]
    base_image: str | None = None
    buildkit: bool = False
    ca_bundle: Path | None = None
    container: ContainerSpec | None = None
    hf_home: str | None = None
    iface: str | None = None
    image: str | None = None
    job: str | None = None
    nodes: int = 1
    head_ip: str = "127.0.0.1"
    ray_port: int = 6379
    dashboard_port: int = 8265
    venv: str = ".venv"
    namespace: str = "default"
    gpus_per_node: int | None = None
    extensions: dict[str, Choice] = field(default_factory=dict)
    wheel_sources: tuple[str, ...] = ()
    extra: dict[str, str] = field(default_factory=dict)
    user: UserPackages = field(default_factory=UserPackages)  # --with ..., git refs at their commit


@dataclass(frozen=True, kw_only=True)
class RenderedFile:
    """One output file and what writing it would do."""

    name: str
    content: str
    executable: bool
    status: Status = "create"


def expand_targets(names: list[str]) -> tuple[str, ...]:
    """`all` means every target; unknown names are bad input."""
    out: list[str] = []
    for name in names:
        if name == "all":
            out += [t for t in TARGETS if t not in out and t not in RESOLVING]
        elif name in TARGETS:
            out += [] if name in out else [name]
        else:
            hint = suggest(name, [*RENDER_TARGETS, "all"])
            raise BadInputError(
                f"unknown render target {name!r}{hint}: choose from {', '.join([*TARGETS, 'all'])}"
            )
    return tuple(out)


def jinja_env() -> Any:
    """The one Jinja environment: StrictUndefined, trailing newline kept, the quoting filters."""
    import jinja2  # noqa: PLC0415  # only rendering needs Jinja

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(data_dir("templates"))),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        # Not HTML: autoescape marks each filter's output (render/quoting.py) so that macros keep
        # it, and the guard refuses any other string that is not a plain word.
        autoescape=True,
        finalize=quoting.guard,
        # bash writes ${#array[@]}; Jinja's default "{#" comment marker would swallow it.
        comment_start_string="{##",
        comment_end_string="##}",
    )
    env.filters.update(quoting.FILTERS)
    return env


def _check_values(options: RenderOptions) -> None:
    for name, image in (("--base-image", options.base_image), ("--image", options.image)):
        if image is not None and IMAGE.problem(image):
            raise BadInputError(f"{name} {image!r} is not an image reference like registry/name:tag")
    for name in ("hf_home", "iface", "image", "job", "head_ip", "venv", "namespace", "base_image"):
        value = getattr(options, name)
        if isinstance(value, str) and ("\n" in value or "\r" in value or "\0" in value):
            raise BadInputError(f"--{name.replace('_', '-')} {value!r} contains a line break or NUL")


def context(plan: Plan, options: RenderOptions) -> dict[str, Any]:
    """Everything the templates see (no host paths unless they describe the target)."""
    _check_values(options)
    row = plan.row
    gpus = options.gpus_per_node if options.gpus_per_node is not None else plan.target.gpu_count.value
    env_vars: list[EnvVar] = environment(plan, options.hf_home, options.iface)
    recipe = _recipe(plan, options)
    return {
        "project": project(plan, recipe) if recipe and "uv-project" in options.targets else None,
        "version": __version__,
        "uv_version": UV_VERSION,
        "uv_row_decides": list(ROW_DECIDES),
        "plan": plan,
        "row": row,
        "python": plan.python,
        "python_minor": minor_of(plan.python),
        "requirements": row.requirements(),
        "recipe": recipe,
        "left_out_json": _left_out_json(plan, recipe),
        "overrides_sentinel": OVERRIDES_SENTINEL,
        "constraints_sentinel": CONSTRAINTS_SENTINEL,
        # The closure file is written just before the first step that reads it (after torch's own).
        "closure_step": next((s.name for s in recipe.steps if s.constraints), None) if recipe else None,
        "probe_code": quoting.verbatim(script_text("import_probe")),
        "gpu_only_json": json.dumps(row.gpu_only_imports, sort_keys=True),
        "known_json": json.dumps(row.known_broken_imports, sort_keys=True)
        if row.known_broken_imports
        else "",
        "index_url": plan.index_url,
        "overrides": list(row.overrides),
        "matrix_sha256": plan.matrix.sha256,
        "row_hash": row.content_hash(),
        "env": env_vars,
        "nvidia_require_cuda": None if forward_compat(plan) else nvidia_require_cuda(row, plan.policy),
        "forward_compat": forward_compat(plan),
        "base_image": options.base_image or (row.docker.base_image if row.docker else "ubuntu:24.04"),
        "buildkit": options.buildkit,
        "ca_bundle": options.ca_bundle is not None,
        "ca_bundle_path": str(options.ca_bundle) if options.ca_bundle else "",
        "ca_file": CA_FILE,
        "container": options.container,
        "hf_home": options.hf_home,
        "image": options.image or f"verl-setup/{row.id}:latest",
        "job": options.job,
        "nodes": options.nodes,
        "gpus_per_node": gpus,
        "head_ip": options.head_ip,
        "ray_port": options.ray_port,
        "dashboard_port": options.dashboard_port,
        "ray_version": row.packages.get("ray", ""),
        "venv": options.venv,
        "namespace": options.namespace,
        "loopback": options.head_ip.startswith("127.") or options.head_ip == "localhost",
        "accel": accelerator_values(row.requires.accelerator),
    }


OVERRIDES_SENTINEL = "@OVERRIDES@"  # where each rendering puts its own overrides file
CONSTRAINTS_SENTINEL = "@CONSTRAINTS@"  # and its own closure (constraints) file


def _left_out_json(plan: Plan, recipe: Recipe | None) -> str:
    """The probe's map of modules left out on purpose (--without NAME), or "" when none are."""
    left = [e.name for e in recipe.extensions if e.mode == "without"] if recipe else []
    modules = plan.matrix.rows_file.left_out_modules(left)
    modules |= recipe.left_out_sources_modules() if recipe else {}
    return json.dumps(modules, sort_keys=True) if modules else ""


def _recipe(plan: Plan, options: RenderOptions) -> Recipe | None:
    """The install recipe, for the targets that print it (a build is checked on the target, not here)."""
    if not {"venv", "docker", "apptainer", "uv-project"} & set(options.targets):
        return None
    cuda = plan.row.torch.cuda
    # A rendered script or image builds what no wheel source has (verl's Dockerfiles build
    # flash-attn in the image), so rendering never refuses for want of a wheel.
    recipe = build_recipe(
        plan,
        extensions=options.extensions,
        nvcc_version=cuda,
        cores=4,
        memory_gib=16,
        wheel_sources=options.wheel_sources,
        env=os.environ,
        missing="build",
    )
    if not options.user.requirements:
        return recipe
    from verl_setup.environment.lock_job import user_recipe  # noqa: PLC0415

    local = [r for r in options.user.requirements if r.kind == "path"]
    image = sorted({"docker", "apptainer"} & set(options.targets))
    if local and image:
        raise BadInputError(
            f"{local[0].shown()} ({local[0].origin}) is a folder on this machine, which {image[0]}'s build "
            "does not see: commit it and give --with 'NAME @ git+URL@COMMIT' (an image installs that "
            "commit), or render venv/uv-project for the checkout"
        )
    return user_recipe(plan, recipe, options.user)


def uv_project_of(plan: Plan, options: RenderOptions) -> Project:
    """The uv project the uv-project target renders (its left-out packages are warnings)."""
    recipe = _recipe(plan, dataclasses.replace(options, targets=("uv-project",)))
    assert recipe is not None  # noqa: S101  # the target always has a recipe
    return project(plan, recipe)


def render(plan: Plan, options: RenderOptions) -> list[RenderedFile]:
    """Render every file of the requested targets (nothing is written here)."""
    env = jinja_env()
    ctx = context(plan, options)
    files: list[RenderedFile] = []
    for target in options.targets:
        for template, name, executable in TARGETS[target]:
            if (name == "rayjob.yaml" and not options.job) or name in {f.name for f in files}:
                continue  # the probe serves docker and apptainer alike
            files.append(
                RenderedFile(name=name, content=env.get_template(template).render(ctx), executable=executable)
            )
    if {"docker", "apptainer"} & set(options.targets) and options.ca_bundle is not None:
        try:
            bundle = options.ca_bundle.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise BadInputError(f"cannot read --ca-bundle {str(options.ca_bundle)!r}: {exc}") from exc
        files.append(RenderedFile(name=CA_FILE, content=bundle, executable=False))
    return files


def compare(files: list[RenderedFile], out: Path, *, force: bool) -> list[RenderedFile]:
    """Mark each file create/unchanged/changed (or overwrite with force)."""
    marked = []
    for f in files:
        path = out / f.name
        try:
            old = path.read_text(encoding="utf-8")
        except (FileNotFoundError, NotADirectoryError):
            status: Status = "create"
        except (OSError, UnicodeDecodeError):
            status = "overwrite" if force else "changed"
        else:
            status = "unchanged" if old == f.content else ("overwrite" if force else "changed")
        marked.append(RenderedFile(name=f.name, content=f.content, executable=f.executable, status=status))
    return marked


def write(files: list[RenderedFile], out: Path) -> None:
    """Write created/overwritten files atomically (temp file + rename), scripts executable."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BadInputError(f"cannot create output folder {str(out)!r}: {exc.strerror}") from exc
    for f in files:
        if f.status not in ("create", "overwrite"):
            continue
        target = out / f.name
        try:
            fd, tmp = tempfile.mkstemp(prefix=f".{f.name}.", dir=out)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(f.content)
            Path(tmp).chmod(0o755 if f.executable else 0o644)
            Path(tmp).replace(target)
        except OSError as exc:
            raise BadInputError(f"cannot write {str(target)!r}: {exc.strerror}") from exc
