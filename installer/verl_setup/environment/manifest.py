"""The manifest an install writes into the environment (verl-setup.json): what was asked, what was
used, what got installed, the closure it was held to; verify and report read it back."""

from __future__ import annotations

from typing import Any

from verl_setup import __version__
from verl_setup.environment.install_job import Job
from verl_setup.environment.user_install import kept_record, user_record
from verl_setup.environment.verify import Report
from verl_setup.util.secrets import mask


def manifest(job: Job, report: Report) -> dict[str, Any]:
    """The record written into the venv: what was asked, what was used, what got installed."""
    from verl_setup.environment.uv import uv_version  # noqa: PLC0415

    plan, lock, snap, choice = job.plan, job.lock, report.snapshot, job.choice
    fa = job.recipe.flash_attn
    return {
        "schema": 1,
        "tool": {"verl-setup": __version__, "uv": uv_version(job.uv)},
        "prefix": str(job.layout.prefix),
        "row": {"id": plan.row.id, "sha256": plan.row.content_hash(), "requirements": plan.row.requirements()}
        if lock is None
        else {"id": lock.row_id, "sha256": lock.fields["row-sha256"], "requirements": None},
        "matrix": {"path": str(plan.matrix.path), "sha256": plan.matrix.sha256},
        "lock": None
        if lock is None
        else {"path": str(lock.path.absolute()), "sha256": lock.fields["sha256"]},
        "index_url": lock.index_url if lock else plan.index_url,
        "python": {
            "version": snap.python,
            "requested": job.wanted,
            "interpreter": choice.request,
            "source": choice.source,
        },
        "recipe": [{"step": c.what, "argv": c.argv[1:]} for c in job.commands],
        "flash_attn": None if fa is None else {"version": fa.version, "mode": fa.mode, "reason": fa.reason},
        "torch_extensions": {
            e.name: {
                "version": e.version,
                "mode": e.mode,
                "source": e.source,
                "distribution": e.distribution or e.name,
                "url": None if e.url is None else mask(e.url),  # R3: a source's password stays out
                "sha256": e.sha256,
                "reason": e.reason,
            }
            for e in job.recipe.extensions
        },
        "sources": {
            name: {"url": url, "mode": "without" if name in job.recipe.left_out_sources else "installed"}
            for name, url in plan.row.sources.items()
        },
        "with": user_record(job, snap.versions()),
        "keep": kept_record(job),
        "platform": snap.platform,
        "facts": plan.target.facts_json(),
        "warnings": [*plan.warnings, *job.recipe.warnings, *([choice.warning] if choice.warning else [])],
        "distributions": dict(sorted(snap.versions().items())),
        "closure": _closure_record(job),
        "import_probe": None if report.probe is None else report.probe.to_json(),
    }


def _closure_record(job: Job) -> dict[str, Any] | None:
    """What the environment was held to: the closure's facts and pins (verify compares with them)."""
    closure = job.recipe.closure
    if closure is None or job.lock is not None:  # a lock is its own closure
        return None
    return {**closure.to_json(), "pins": closure.recorded_pins()}
