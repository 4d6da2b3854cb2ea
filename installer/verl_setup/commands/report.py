"""`verl-setup report`: one Markdown block to paste into an issue: the host, the selected row and
its proof, verify's result, doctor's findings and, given a log, diagnose's verdict. Secrets are
masked; every section is cut to a budget so that the block fits in one GitHub comment.

Flags -> ReportRequest -> diagnose.bug_report.gather_report -> the sections as Markdown."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO, TypeVar

from verl_setup import __version__
from verl_setup.commands.common import plan_inputs
from verl_setup.commands.flags import add_plan_flags
from verl_setup.commands.text_output import host_text, plan_text
from verl_setup.diagnose.bug_report import QUICK_CHECKS, BugReport, MissingPart, ReportRequest, gather_report
from verl_setup.errors import VerlSetupError
from verl_setup.util.secrets import mask
from verl_setup.util.vocab import CHECK_IDS

if TYPE_CHECKING:
    from verl_setup.plan.make import PlanInputs

T = TypeVar("T")
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


def sections(report: BugReport) -> list[Section]:
    """The report's sections, in order: each part's text, or the line saying why it is missing."""
    from verl_setup.diagnose.verdict import text_report  # noqa: PLC0415
    from verl_setup.doctor.result import report_text  # noqa: PLC0415

    host, recorded = report.host, report.host_file
    found = [
        Section(
            title="Host (verl-setup detect)",
            text=host.line
            if isinstance(host, MissingPart)
            else (f"(recorded host file {recorded.name})\n" if recorded else "") + host_text(host),
        ),
        Section(
            title="Selected row and its proof (verl-setup plan)",
            text=_text(report.plan, lambda plan: plan_text(plan, explain=False)),
        ),
        Section(title="Environment (verl-setup verify)", text=_text(report.verify, str)),
        Section(title="Doctor", text=_text(report.doctor, report_text)),
    ]
    if report.diagnosis is not None:
        found.append(
            Section(title="Failed run (verl-setup diagnose)", text=_text(report.diagnosis, text_report))
        )
    return found


def _text(part: T | MissingPart, show: Callable[[T], str]) -> str:
    return part.line if isinstance(part, MissingPart) else show(part)


def _plan_inputs(args: argparse.Namespace) -> PlanInputs | VerlSetupError:
    """The plan flags, or why they make no plan (the report says so in the plan's section)."""
    try:
        return plan_inputs(args)
    except VerlSetupError as exc:
        return exc


def run(args: argparse.Namespace, env: Mapping[str, str], out: TextIO) -> int:
    """Print the Markdown block."""
    request = ReportRequest(
        plan=_plan_inputs(args),
        host_file=args.host,
        prefix=args.prefix,
        imports=args.imports,
        checks=tuple(args.check),
        matrix=args.matrix,
        logs=tuple(args.log),
    )
    out.write(markdown(sections(gather_report(request, env)), env=env, home=args.mask_home))
    return 0
