"""`doctor`'s use case: run the checks, and name a Ray session whose launch already failed.

examine(options, env, host) -> Examination. The checks are doctor/'s; the failed session is
found by diagnose/'s source reader, which doctor/ (below diagnose/) cannot import: so the use
case that needs both lives here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verl_setup.diagnose.sources import failed_session
from verl_setup.doctor.context import Context, Options
from verl_setup.doctor.result import CheckResult, report_json
from verl_setup.doctor.run import make_context, run_checks, selected
from verl_setup.errors import CheckFailedError


@dataclass(frozen=True, kw_only=True)
class Examination:
    """The checks' results, the context they ran in, and the hint to diagnose a failed session."""

    context: Context
    results: tuple[CheckResult, ...]
    hint: str | None

    @property
    def failed(self) -> list[str]:
        return [r.id for r in self.results if r.status == "fail"]

    def error(self) -> CheckFailedError | None:
        """Exit 5 naming each check that failed."""
        failed = self.failed
        return CheckFailedError(f"{len(failed)} checks failed: {', '.join(failed)}") if failed else None

    def to_json(self) -> dict[str, Any]:
        """The --json data (the envelope's, schemas/doctor.json)."""
        return {**report_json(self.results), **({"diagnose_hint": self.hint} if self.hint else {})}


def examine(options: Options, env: Mapping[str, str], host: Path | None) -> Examination:
    """Run the selected checks (bad ids are bad input, exit 2, before any probe runs)."""
    selected(options.checks)
    ctx = make_context(options, env, host)
    results = run_checks(ctx)
    session = failed_session(env)
    hint = (
        f"a Ray session at {session} has a worker that wrote to its .err: if that launch failed, "
        f"`verl-setup diagnose {session}` names its first cause"
        if session
        else None
    )
    return Examination(context=ctx, results=tuple(results), hint=hint)
