"""Command line: one _add_X/_run_X pair per subcommand; the logic lives in the modules they call."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from verl_setup import __version__
from verl_setup.errors import BadInputError, NoCompatibleRowError, VerlSetupError
from verl_setup.output import envelope
from verl_setup.util.bounded import one_line
from verl_setup.util.vocab import BACKEND_NAMES, CHECK_IDS, ENGINE_NAMES, POLICIES, RENDER_TARGETS


def _whole(what: str, maximum: int) -> Any:
    """An argparse type for a count or port: ASCII digits, bounded; a bad one is one error line."""

    def parse(text: str) -> int:
        from verl_setup.util.versions import parse_count  # noqa: PLC0415  # keep start-up lean

        return parse_count(text, what, maximum)

    return parse


def add_plan_flags(p: argparse.ArgumentParser) -> None:
    """The flags that describe the target machine; every command that plans takes them."""
    g = p.add_argument_group("target machine (flag > VERL_SETUP_* env > --host file > detection)")
    g.add_argument("--host", type=Path, metavar="FILE", help="a saved `verl-setup detect --json`")
    g.add_argument("--driver", metavar="VERSION", help="NVIDIA driver, e.g. 535.129.03")
    g.add_argument("--gpu", action="append", default=[], metavar="NAME", help="GPU model (repeatable)")
    g.add_argument("--sm", metavar="X.Y", help="compute capability of the GPUs")
    g.add_argument("--gpu-count", type=_whole("GPU count", 4096), metavar="N", help="GPUs per node")
    g.add_argument("--no-gpu", action="store_true", help="plan for a machine without an NVIDIA GPU")
    g.add_argument("--arch", metavar="ARCH", help="CPU architecture of the target: x86_64 or aarch64")
    g.add_argument("--glibc", metavar="X.Y", help="glibc of the target, e.g. 2.35")
    g.add_argument("--python", metavar="X.Y[.Z]", help="Python to install")
    g.add_argument("--verl", metavar="PREFIX", help="verl version prefix, e.g. 0.7")
    g.add_argument("--engine", choices=ENGINE_NAMES, help="rollout engine")
    g.add_argument("--backend", choices=BACKEND_NAMES, help="training backend (default fsdp)")
    g.add_argument(
        "--policy", choices=POLICIES,
        help="driver policy (default compat; forward: CUDA forward compatibility in the image)",
    )  # fmt: skip
    g.add_argument(
        "--row",
        metavar="ID",
        help="this matrix row instead of selecting one (what it fails becomes warnings)",
    )
    g.add_argument(
        "--matrix", type=Path, metavar="FILE", help="use this rows file instead of the bundled one"
    )


def add_recipe_flags(p: argparse.ArgumentParser) -> None:
    """How packages built against torch get in: a prebuilt wheel by default, else one of these."""
    g = p.add_argument_group(
        "packages built against torch: flash-attn, transformer-engine-torch, apex (by default a "
        "prebuilt wheel matching torch, else a refusal)"
    )
    g.add_argument(
        "--build", action="append", default=[], metavar="NAME",
        help="compile NAME after torch (needs nvcc; an hour or more; repeatable)",
    )  # fmt: skip
    g.add_argument("--build-flash-attn", action="store_true", help="the same as --build flash-attn")
    g.add_argument(
        "--without", action="append", default=[], metavar="NAME",
        help="leave NAME out (the message says what verl then cannot do; repeatable)",
    )  # fmt: skip


def _plan(args: argparse.Namespace) -> Any:
    from verl_setup.commands.common import plan_inputs  # noqa: PLC0415  # lazy: keeps --help fast
    from verl_setup.plan.make import make_plan  # noqa: PLC0415

    return make_plan(plan_inputs(args), os.environ)


def _add_detect(sub: Any) -> None:
    p = sub.add_parser("detect", help="describe this host (GPUs, driver, Pythons, CUDA, tools)")
    p.add_argument("--json", action="store_true", help="machine-readable HostFacts (schema 1)")
    g = p.add_argument_group("every node of a cluster, as a cluster file (plan/install/render --cluster)")
    g.add_argument("--ray", metavar="ADDRESS", help="one detection task pinned to each alive Ray node")
    g.add_argument("--slurm", action="store_true", help="one srun task per node of this allocation")
    g.add_argument("--out", type=Path, metavar="FILE", help="write the cluster file here (default stdout)")
    g.add_argument("--force", action="store_true", help="overwrite --out")
    g.add_argument("--prefix", type=Path, metavar="PATH", help="env whose Python has ray (default .venv)")
    g.add_argument("--python", metavar="EXE", help="interpreter with ray, as the cluster's")
    g.add_argument("--runtime-env", type=Path, metavar="FILE", help="a rendered runtime_env.yaml")
    g.add_argument(
        "--installed", action="store_true",
        help="run each node's own verl-setup from PATH (default: ship this package as py_modules)",
    )  # fmt: skip
    g.add_argument("--timeout", type=float, default=120.0, metavar="S", help="hard limit (120)")
    p.set_defaults(run=_run_detect)


def _run_detect(args: argparse.Namespace) -> int:
    if args.ray is not None or args.slurm:
        from verl_setup.commands import detect_cluster  # noqa: PLC0415

        return detect_cluster.run(args, os.environ, sys.stdout)
    from verl_setup.commands import reports as report  # noqa: PLC0415
    from verl_setup.host.detect import detect  # noqa: PLC0415

    facts = detect()
    sys.stdout.write(facts.to_json() if args.json else report.host_text(facts))
    return 0


def _add_plan(sub: Any) -> None:
    p = sub.add_parser("plan", help="select the matrix row for a machine, and say why")
    p.add_argument("--json", action="store_true", help="machine-readable plan (schema 1)")
    p.add_argument("--explain", action="store_true", help="show evidence and every rejected row")
    p.add_argument(
        "--cluster", type=Path, metavar="FILE", help="one row for every node of a cluster file (detect --ray)"
    )
    add_plan_flags(p)
    p.set_defaults(run=_run_plan)


def _run_plan(args: argparse.Namespace) -> int:
    from verl_setup.commands import reports as report  # noqa: PLC0415

    if args.cluster is not None:
        from verl_setup.commands import plan_cluster  # noqa: PLC0415

        return plan_cluster.run(args, os.environ, sys.stdout)
    plan = _plan(args)
    if args.json:
        sys.stdout.write(envelope(plan.to_json()))
    else:
        sys.stdout.write(report.plan_text(plan, explain=args.explain))
    return 0


def _add_matrix(sub: Any) -> None:
    p = sub.add_parser("matrix", help="the compatibility data itself")
    msub = p.add_subparsers(
        dest="matrix_cmd", required=True, metavar="list|show|validate|prove|check|propose"
    )
    ls = msub.add_parser("list", help="every row, one line each")
    ls.add_argument("--json", action="store_true")
    ls.add_argument("--matrix", type=Path, metavar="FILE")
    ls.set_defaults(run=_run_matrix_list)
    show = msub.add_parser("show", help="one row with its evidence")
    show.add_argument("id")
    show.add_argument("--json", action="store_true")
    show.add_argument("--matrix", type=Path, metavar="FILE")
    show.set_defaults(run=_run_matrix_show)
    val = msub.add_parser("validate", help="check a rows file; report file, line, row and key")
    val.add_argument("file", nargs="?", type=Path)
    val.add_argument("--json", action="store_true")
    val.set_defaults(run=_run_matrix_validate)
    prove = msub.add_parser(
        "prove", help="resolve, install and import-probe rows for real; record proof.yaml"
    )
    prove.add_argument("ids", nargs="*", metavar="ROW", help="rows to prove (default: every row)")
    prove.add_argument("--matrix", type=Path, metavar="FILE")
    prove.add_argument("--json", action="store_true", help="machine-readable results (schema 1)")
    prove.add_argument("--no-record", action="store_true", help="do not write proof.yaml")
    prove.set_defaults(run=_run_matrix_prove)
    check = msub.add_parser(
        "check", help="re-resolve rows against the index today; what moved and why (exit 5: a regression)"
    )
    check.add_argument("ids", nargs="*", metavar="ROW", help="rows to check (default: every row)")
    check.add_argument("--matrix", type=Path, metavar="FILE")
    check.add_argument("--json", action="store_true", help="machine-readable results (schema 1)")
    check.add_argument(
        "--record", action="store_true", help="record today's resolutions as the baseline (resolved.yaml)"
    )
    check.set_defaults(run=_run_matrix_check)
    propose = msub.add_parser(
        "propose", help="candidate rows for releases newer than the matrix, from their metadata"
    )
    propose.add_argument(
        "--since",
        metavar="DATE",
        help="releases uploaded after DATE (default: the newest pinned release's date)",
    )
    propose.add_argument("--out", type=Path, metavar="FILE", help="write the candidates here (a new file)")
    propose.add_argument("--matrix", type=Path, metavar="FILE")
    propose.add_argument("--json", action="store_true", help="machine-readable results (schema 1)")
    propose.set_defaults(run=_run_matrix_propose)


def _run_matrix_list(args: argparse.Namespace) -> int:
    from verl_setup.commands import reports as report  # noqa: PLC0415
    from verl_setup.matrix.load import load_matrix  # noqa: PLC0415

    matrix = load_matrix(args.matrix)
    if args.json:
        rows = [r.to_dict() for r in matrix.rows]
        sys.stdout.write(envelope({"matrix": str(matrix.path), "sha256": matrix.sha256, "rows": rows}))
    else:
        sys.stdout.write(report.matrix_list_text(matrix))
    return 0


def _run_matrix_show(args: argparse.Namespace) -> int:
    from verl_setup.commands import reports as report  # noqa: PLC0415
    from verl_setup.matrix.load import load_matrix  # noqa: PLC0415

    matrix = load_matrix(args.matrix)
    row = matrix.row(args.id)
    if args.json:
        sys.stdout.write(
            envelope(
                {
                    "row": row.to_dict(),
                    "proof": dict(zip(("level", "detail"), matrix.proof_of(row), strict=True)),
                }
            )
        )
    else:
        sys.stdout.write(report.row_text(row, matrix))
    return 0


def _run_matrix_prove(args: argparse.Namespace) -> int:
    from verl_setup.environment.prove import command  # noqa: PLC0415
    from verl_setup.matrix.load import load_matrix  # noqa: PLC0415

    matrix = load_matrix(args.matrix)
    return command(args.ids, matrix, json_out=args.json, keep_record=not args.no_record, out=sys.stdout)


def _run_matrix_check(args: argparse.Namespace) -> int:
    from verl_setup.commands.matrix_check import command  # noqa: PLC0415
    from verl_setup.matrix.load import load_matrix  # noqa: PLC0415

    matrix = load_matrix(args.matrix)
    return command(args.ids, matrix, json_out=args.json, record=args.record, env=os.environ, out=sys.stdout)


def _run_matrix_propose(args: argparse.Namespace) -> int:
    from verl_setup.commands.matrix_propose import command  # noqa: PLC0415
    from verl_setup.matrix.load import load_matrix  # noqa: PLC0415

    matrix = load_matrix(args.matrix)
    return command(
        matrix, since=args.since, out_file=args.out, json_out=args.json, env=os.environ, out=sys.stdout
    )


def _run_matrix_validate(args: argparse.Namespace) -> int:
    from verl_setup.matrix.load import check, default_matrix_path  # noqa: PLC0415

    path = (args.file or default_matrix_path()).resolve()
    problems, matrix = check(path)
    if args.json:
        sys.stdout.write(envelope({"file": str(path), "ok": not problems, "problems": problems}))
    elif problems:
        sys.stdout.write("".join(f"{p}\n" for p in problems))
    else:
        assert matrix is not None  # noqa: S101  # check() returns a matrix when there are no problems
        sys.stdout.write(f"{path}: {len(matrix.rows)} rows, no problems\n")
    return 2 if problems else 0


class _Parser(argparse.ArgumentParser):
    """argparse with a usage error as one line (the value escaped), like every other bad input."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {one_line(message)} (see --help)\n")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; with `command`, only that subcommand's parser (a faster start)."""
    parser = _Parser(
        prog="verl-setup",
        description="Detect a GPU host, select an evidence-backed verl stack, install it with uv.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, add in SUBCOMMANDS.items():
        if command is None or name == command:
            add(sub)
    return parser


def _add_render(sub: Any) -> None:
    p = sub.add_parser("render", help="write the files that reproduce the planned environment")
    p.add_argument("targets", nargs="+", metavar="TARGET", help=f"{', '.join(RENDER_TARGETS)} or all")
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="folder to write into")
    p.add_argument("--dry-run", action="store_true", help="show what would be written, write nothing")
    p.add_argument("--force", action="store_true", help="overwrite files that differ (hand edits are lost)")
    p.add_argument("--json", action="store_true", help="machine-readable list of files and their status")
    _add_artifact_flags(p)
    add_plan_flags(p)
    p.set_defaults(run=_run_render)


def _add_artifact_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("artifact options")
    g.add_argument("--base-image", metavar="IMG", help="Dockerfile base image (default: the row's)")
    g.add_argument("--buildkit", action="store_true", help="use BuildKit cache mounts for uv")
    g.add_argument("--ca-bundle", type=Path, metavar="FILE", help="CA bundle for TLS-intercepting proxies")
    g.add_argument("--hf-home", metavar="PATH", help="Hugging Face cache for every node")
    g.add_argument("--iface", metavar="NAME", help="network interface for NCCL and Gloo")
    g.add_argument("--image", metavar="IMG", help="container image for KubeRay")
    g.add_argument("--job", metavar="CMD", help="entrypoint of a KubeRay RayJob")
    g.add_argument(
        "--nodes",
        type=_whole("node count", 100_000),
        default=1,
        metavar="N",
        help="nodes for Slurm/KubeRay (default 1)",
    )
    g.add_argument("--head-ip", default="127.0.0.1", metavar="ADDR", help="Ray head address")
    g.add_argument("--ray-port", type=_whole("port", 65535), default=6379, metavar="PORT")
    g.add_argument("--dashboard-port", type=_whole("port", 65535), default=8265, metavar="PORT")
    g.add_argument("--venv", default=".venv", metavar="PATH", help="venv path in setup-venv.sh")
    g.add_argument("--namespace", default="default", metavar="NS", help="Kubernetes namespace")
    add_recipe_flags(p)


def _run_render(args: argparse.Namespace) -> int:
    from verl_setup.commands.render import run_render  # noqa: PLC0415

    return run_render(args, _plan(args))


def _add_install(sub: Any) -> None:
    p = sub.add_parser("install", help="uv venv + exact pins + verify, swapped into place atomically")
    p.add_argument("--prefix", type=Path, default=Path(".venv"), metavar="PATH", help="default .venv")
    p.add_argument("--lock", type=Path, metavar="FILE", help="install exactly this lock (hashes enforced)")
    p.add_argument("--dry-run", action="store_true", help="print the exact uv commands, change nothing")
    p.add_argument("--json", action="store_true", help="machine-readable result (schema 1)")
    p.add_argument(
        "--no-python-downloads", action="store_true",
        help="never let uv download the exact Python (then the same minor found here, with a warning)",
    )  # fmt: skip
    p.add_argument("--wait", type=float, default=600.0, metavar="S", help="wait for another install (600)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress lines (warnings still print)")
    p.add_argument("--no-import", action="store_true", help="skip the import probe")
    p.add_argument(
        "--import-timeout", type=float, default=900.0, metavar="S", help="for the import probe (900)"
    )
    g = p.add_argument_group("every node of a cluster (a prefix path the same on each node)")
    g.add_argument("--cluster", type=Path, metavar="FILE", help="install the cluster plan's row on its nodes")
    g.add_argument("--ray", metavar="ADDRESS", help="the Ray head (default: the cluster file's)")
    g.add_argument("--ray-python", metavar="EXE", help="interpreter with the cluster's ray (default .venv)")
    g.add_argument(
        "--installed", action="store_true",
        help="run each node's own verl-setup from PATH (default: ship this package as py_modules)",
    )  # fmt: skip
    g.add_argument("--timeout", type=float, default=3600.0, metavar="S", help="per node (3600)")
    add_recipe_flags(p)
    add_plan_flags(p)
    p.set_defaults(run=_run_install)


def _run_install(args: argparse.Namespace) -> int:
    from verl_setup.commands import install  # noqa: PLC0415

    if args.cluster is not None:
        from verl_setup.commands import install_cluster  # noqa: PLC0415

        return install_cluster.run(args, os.environ, sys.stdout)
    return install.run(args, os.environ, sys.stdout)


def _add_lock(sub: Any) -> None:
    p = sub.add_parser("lock", help="a hashed lock for the row's target Python and platform")
    p.add_argument("--out", type=Path, metavar="FILE", help="write the lock here (default: stdout)")
    p.add_argument("--json", action="store_true", help="describe the written lock (schema 1)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress lines (warnings still print)")
    add_recipe_flags(p)
    add_plan_flags(p)
    p.set_defaults(run=_run_lock)


def _run_lock(args: argparse.Namespace) -> int:
    from verl_setup.commands import lock  # noqa: PLC0415

    return lock.run(args, os.environ, sys.stdout)


def _add_verify(sub: Any) -> None:
    p = sub.add_parser("verify", help="does an environment (or every Ray node) match its lock or row?")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--prefix", type=Path, metavar="PATH", help="a venv (default $VIRTUAL_ENV, .venv)")
    where.add_argument("--python", metavar="EXE", help="an interpreter")
    p.add_argument("--lock", type=Path, metavar="FILE", help="compare with this lock")
    p.add_argument("--row", metavar="ID", help="compare with a matrix row's pins (no manifest, no lock)")
    p.add_argument("--matrix", type=Path, metavar="FILE", help="rows file for --row")
    p.add_argument("--ray", metavar="ADDRESS", help="verify every alive node of this Ray cluster")
    p.add_argument("--timeout", type=float, default=120.0, metavar="S", help="hard limit for --ray (120)")
    p.add_argument("--no-import", action="store_true", help="skip the import probe")
    p.add_argument(
        "--import-timeout", type=float, default=900.0, metavar="S", help="for the import probe (900)"
    )
    p.add_argument("--json", action="store_true", help="machine-readable report (schema 1)")
    p.set_defaults(run=_run_verify)


def _run_verify(args: argparse.Namespace) -> int:
    from verl_setup.commands import verify  # noqa: PLC0415

    return verify.run(args, os.environ, sys.stdout)


def _add_doctor(sub: Any) -> None:
    p = sub.add_parser("doctor", help="the silent traps (Python, CUDA, Ray, HF cache, GPU memory, launch)")
    p.add_argument("--json", action="store_true", help="machine-readable report (schema 1)")
    p.add_argument(
        "--check",
        action="append",
        default=[],
        metavar="ID",
        help=f"run only this check (repeatable): {', '.join(CHECK_IDS)}",
    )
    p.add_argument("--prefix", type=Path, metavar="PATH", help="the venv to inspect (default $VIRTUAL_ENV)")
    p.add_argument("--ray-address", metavar="ADDR", help="Ray head (default RAY_ADDRESS, then a local head)")
    p.add_argument("--model-size", metavar="SIZE", help="space a model download needs (default 16GB)")
    p.add_argument("--host", type=Path, metavar="FILE", help="a saved `verl-setup detect --json`")
    p.add_argument(
        "--matrix", type=Path, metavar="FILE", help="use this rows file instead of the bundled one"
    )
    p.add_argument("launch", nargs="*", metavar="-- LAUNCH COMMAND", help="the training command to lint")
    p.set_defaults(run=_run_doctor)


def _run_doctor(args: argparse.Namespace) -> int:
    from verl_setup.commands import doctor  # noqa: PLC0415

    return doctor.run(args, os.environ, sys.stdout)


def _add_docker(sub: Any) -> None:
    p = sub.add_parser("docker", help="build the rendered image for real")
    dsub = p.add_subparsers(dest="docker_cmd", required=True, metavar="build")
    b = dsub.add_parser("build", help="render, build through the Docker SDK, verify inside, label")
    b.add_argument("--tag", metavar="TAG", help="image tag (required unless --print-context)")
    b.add_argument(
        "--out", type=Path, metavar="DIR", help="keep the build context here (default: a temp dir)"
    )
    b.add_argument("--push", action="store_true", help="push the verified image")
    b.add_argument("--force", action="store_true", help="overwrite changed files in --out")
    b.add_argument("--network", metavar="MODE", help="network mode for RUN steps (e.g. host)")
    b.add_argument("--print-context", action="store_true", help="list what would be sent, build nothing")
    b.add_argument("--json", action="store_true", help="machine-readable result")
    _add_artifact_flags(b)
    add_plan_flags(b)
    b.set_defaults(run=_run_docker_build)


def _run_docker_build(args: argparse.Namespace) -> int:
    from verl_setup.commands import docker  # noqa: PLC0415

    return docker.run(args, os.environ, sys.stdout)


BAD_INPUT = (BadInputError, NoCompatibleRowError)

# One line per subcommand, in --help order.
SUBCOMMANDS = {
    "detect": _add_detect,
    "plan": _add_plan,
    "matrix": _add_matrix,
    "render": _add_render,
    "docker": _add_docker,
    "install": _add_install,
    "lock": _add_lock,
    "verify": _add_verify,
    "doctor": _add_doctor,
}


def main_inner(argv: Sequence[str] | None = None) -> int:
    """Parse and run; errors propagate (tests call this)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    # Only the named subcommand's parser is built; anything else (--help, a typo) gets them all.
    command = argv[0] if argv and argv[0] in SUBCOMMANDS else None
    args = build_parser(command).parse_args(argv)
    return int(args.run(args))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: one clear line per error, and the documented exit code."""
    try:
        return main_inner(argv)
    except VerlSetupError as exc:
        # A bad value is echoed escaped and cut, so the error stays one line (a build failure's
        # log tail is meant to span lines).
        text = one_line(str(exc), limit=4000) if isinstance(exc, BAD_INPUT) else str(exc)
        sys.stderr.write(f"verl-setup: error: {text}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("verl-setup: interrupted\n")
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:
        if os.environ.get("VERL_SETUP_DEBUG"):
            raise
        sys.stderr.write(
            f"verl-setup: unexpected error: {type(exc).__name__}: {one_line(str(exc))} "
            "(VERL_SETUP_DEBUG=1 shows more)\n"
        )
        return 1
