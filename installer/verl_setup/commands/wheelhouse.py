"""`verl-setup wheelhouse build|list`: compile a row's torch extensions once into a shared folder."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from verl_setup.commands.common import plan_inputs
from verl_setup.commands.flags import add_plan_flags, whole
from verl_setup.errors import BadInputError
from verl_setup.output import Progress, envelope


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The wheelhouse subcommands and their flags."""
    wsub = p.add_subparsers(dest="wheelhouse_cmd", required=True, metavar="build|list")
    b = wsub.add_parser("build", help="compile the row's missing torch extensions into DIR (PEP 503)")
    b.add_argument("--out", type=Path, required=True, metavar="DIR", help="the wheelhouse folder")
    b.add_argument(
        "--only", action="append", default=[], metavar="NAME", help="only this extension (repeatable)"
    )
    b.add_argument(
        "--source", action="append", default=[], metavar="NAME=PATH|URL",
        help="build NAME from this sdist or source folder (default: its sdist on uv's index)",
    )  # fmt: skip
    b.add_argument(
        "--arch-list", metavar="LIST", help="TORCH_CUDA_ARCH_LIST (default: the GPUs, else the row's range)"
    )
    b.add_argument(
        "--jobs", type=whole("--jobs", 1024), metavar="N", help="MAX_JOBS (default: cores, 4 GiB each)"
    )
    b.add_argument(
        "--nvcc", choices=("auto", "host", "pypi"), default="auto",
        help="auto: the host's toolkit of torch's CUDA major, else NVIDIA's PyPI wheels",
    )  # fmt: skip
    b.add_argument("--keep-scratch", action="store_true", help="keep the scratch environment")
    b.add_argument("--json", action="store_true", help="what was built or kept, as the JSON envelope")
    add_plan_flags(b)
    b.set_defaults(run=run_build)
    ls = wsub.add_parser("list", help="the wheels of a wheelhouse and what each was built against")
    ls.add_argument("dir", type=Path, metavar="DIR")
    ls.add_argument("--verify", action="store_true", help="also check every wheel's sha256")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(run=run_list)


def run_build(args: argparse.Namespace, env: Mapping[str, str], out: TextIO) -> int:
    """Build what the folder lacks for the row; print what was built and kept."""
    from verl_setup.wheelbuild.build import WheelhouseRequest, build_wheelhouse_for  # noqa: PLC0415
    from verl_setup.wheelbuild.source import parse_sources  # noqa: PLC0415

    if args.out.exists() and not args.out.is_dir():
        raise BadInputError(f"--out {args.out}: not a folder")
    request = WheelhouseRequest(
        inputs=plan_inputs(args),
        out=args.out.absolute(),
        only=tuple(args.only),
        sources=parse_sources(args.source),
        arch_list=args.arch_list,
        jobs=args.jobs,
        nvcc=args.nvcc,
        keep_scratch=args.keep_scratch,
    )
    report = build_wheelhouse_for(request, env, Progress(quiet=args.quiet))
    if args.json:
        out.write(envelope("wheelhouse build", report.to_json()))
    else:
        for o in report.outcomes:
            out.write(f"{o.status:<8} {o.wheel}\n")
        if not report.outcomes:
            out.write(f"row {report.row} installs no package built against torch\n")
    return 0


def run_list(args: argparse.Namespace, _env: Mapping[str, str], out: TextIO) -> int:
    """One line per wheel: name, version, torch, CUDA, Python, arch list."""
    from verl_setup.util.wheelhouse import listed_entries  # noqa: PLC0415

    entries = listed_entries(args.dir, verify=args.verify)
    if args.json:
        out.write(
            envelope(
                "wheelhouse list",
                {
                    "dir": str(args.dir),
                    "wheels": [{"wheel": str(e.wheel), **e.manifest.to_json()} for e in entries],
                },
            )
        )
        return 0
    for e in entries:
        m = e.manifest
        archs = ";".join(m.arch_list)
        out.write(
            f"{m.name} {m.version}  torch {m.torch}  CUDA {m.cuda}  {m.python}  {archs}  {e.wheel.name}\n"
        )
    return 0
