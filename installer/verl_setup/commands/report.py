"""`verl-setup report`: one Markdown block to paste into an issue: the host, the selected row and
its proof, verify's result, doctor's findings and, given a log, diagnose's verdict. Secrets are
masked; every section is cut to a budget so that the block fits in one GitHub comment."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from verl_setup import __version__
from verl_setup.commands.common import plan_for
from verl_setup.commands.flags import add_plan_flags
from verl_setup.commands.text_output import host_text, plan_text
from verl_setup.errors import VerlSetupError
from verl_setup.util.bounded import one_line
from verl_setup.util.secrets import mask
from verl_setup.util.vocab import CHECK_IDS

# Doctor checks that read files and probes only (no throwaway Ray, no collective): seconds.
QUICK_CHECKS = ("python", "cuda", "gpu-memory", "memory", "hf-cache")
GITHUB_COMMENT_LIMIT = 65536  # characters GitHub accepts in one issue comment
BUDGET = 60_000  # what the report may use, leaving room for the user's own words
SECTION_LINES = 80
LINE_CHARS = 500


@dataclass(frozen=True, kw_only=True)
class Section:
    """A titled block of plain text (shown as a code block)."""

    title: str
    text: str


def clip(text: str, max_lines: int, line_chars: int = LINE_CHARS) -> str:
    """At most `max_lines` lines of at most `line_chars` characters; says how much was cut."""
    lines = text.rstrip("\n").splitlines()
    cut = [ln if len(ln) <= line_chars else ln[: line_chars - 3] + "..." for ln in lines[:max_lines]]
    if len(lines) > max_lines:
        cut.append(f"... {len(lines) - max_lines} more lines")
    return "\n".join(cut)


def markdown(sections: Sequence[Section], *, env: Mapping[str, str] | None = None, home: bool = False) -> str:
    """One <details> block with a code block per section, masked, under BUDGET characters."""
    lines_each = SECTION_LINES
    while True:
        parts = [f"<details><summary>verl-setup {__version__} report</summary>", ""]
        for s in sections:
            body = clip(mask(s.text, env=env, home=home), lines_each).replace("```", "'''")  # mask, then cut
            parts += [f"### {s.title}", "", "```", body, "```", ""]
        parts.append("</details>")
        out = "\n".join(parts) + "\n"
        if len(out) <= BUDGET or lines_each <= 5:
            return out if len(out) <= BUDGET else out[: BUDGET - 40] + "\n```\n(report cut)\n</details>\n"
        lines_each //= 2


def add_arguments(p: argparse.ArgumentParser) -> None:
    """report's flags: the plan flags (--host FILE for a recorded host), the env, a log."""
    p.add_argument("--prefix", type=Path, metavar="PATH", help="the venv (default $VIRTUAL_ENV, .venv)")
    p.add_argument(
        "--log", action="append", default=[], type=Path, metavar="PATH",
        help="a failed run's log or Ray session folder: adds diagnose's verdict (repeatable)",
    )  # fmt: skip
    p.add_argument(
        "--check", action="append", default=[], metavar="ID",
        help=f"doctor checks to include (default: {', '.join(QUICK_CHECKS)}; any of {', '.join(CHECK_IDS)})",
    )  # fmt: skip
    p.add_argument("--imports", action="store_true", help="let verify run its import probe (slow)")
    p.add_argument("--mask-home", action="store_true", help="write the home folder as ~")
    add_plan_flags(p)
    p.set_defaults(run=run)


def _safely(what: str, make: Callable[[], str]) -> str:
    """A section's text, or one line saying why it is missing (a report must not fail)."""
    try:
        return make()
    except VerlSetupError as exc:
        return f"{what} not available: {one_line(str(exc))}"


def _host(args: argparse.Namespace) -> str:
    from verl_setup.host.detect import detect  # noqa: PLC0415
    from verl_setup.host.facts import load_host_file  # noqa: PLC0415

    facts = load_host_file(args.host) if args.host else detect()
    return (f"(recorded host file {args.host.name})\n" if args.host else "") + host_text(facts)


def _verify(args: argparse.Namespace, env: Mapping[str, str]) -> str:
    from verl_setup.environment.verify_target import report_verify  # noqa: PLC0415

    return report_verify(args.prefix, env, imports=args.imports)


def _doctor(args: argparse.Namespace, env: Mapping[str, str]) -> str:
    from verl_setup.doctor.context import Options  # noqa: PLC0415
    from verl_setup.doctor.result import report_text  # noqa: PLC0415
    from verl_setup.doctor.run import make_context, run_checks  # noqa: PLC0415
    from verl_setup.plan.target import from_env  # noqa: PLC0415

    options = Options(checks=tuple(args.check) or QUICK_CHECKS, prefix=args.prefix, matrix=args.matrix)
    host = from_env(args.host, env, "VERL_SETUP_HOST")
    return report_text(run_checks(make_context(options, env, host)))


def _diagnose(args: argparse.Namespace, env: Mapping[str, str]) -> str:
    from verl_setup.diagnose.sources import gather  # noqa: PLC0415
    from verl_setup.diagnose.verdict import diagnose, text_report  # noqa: PLC0415

    return text_report(diagnose(gather(args.log, env, system=False)))


def sections(args: argparse.Namespace, env: Mapping[str, str]) -> list[Section]:
    """The report's sections, in order."""
    found = [
        Section(title="Host (verl-setup detect)", text=_safely("detect", lambda: _host(args))),
        Section(
            title="Selected row and its proof (verl-setup plan)",
            text=_safely("plan", lambda: plan_text(plan_for(args, env), explain=False)),
        ),
        Section(title="Environment (verl-setup verify)", text=_safely("verify", lambda: _verify(args, env))),
        Section(title="Doctor", text=_safely("doctor", lambda: _doctor(args, env))),
    ]
    if args.log:
        found.append(
            Section(
                title="Failed run (verl-setup diagnose)",
                text=_safely("diagnose", lambda: _diagnose(args, env)),
            )
        )
    return found


def run(args: argparse.Namespace, env: Mapping[str, str], out: TextIO) -> int:
    """Print the Markdown block."""
    out.write(markdown(sections(args, env), env=env, home=args.mask_home))
    return 0
