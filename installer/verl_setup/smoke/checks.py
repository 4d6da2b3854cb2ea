"""The smoke run's checks, each named: what a run that trained must show.

exit (0 within the limit), losses (finite actor/pg_loss, actor/grad_norm > 0 on every step),
checkpoint (model, optimizer and Hugging Face weights), weights (the saved ones differ from the
initial ones), weight sync (training/rollout_probs_diff_mean below a threshold: the rollout served
the weights being trained).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verl_setup.smoke.metrics import finite
from verl_setup.smoke.safetensors_read import changed, tensors

PG_LOSS = "actor/pg_loss"
GRAD_NORM = "actor/grad_norm"
PROBS_DIFF = "training/rollout_probs_diff_mean"


@dataclass(frozen=True, kw_only=True)
class Check:
    """One named check: passed or not, in words, with the figures it read."""

    name: str
    ok: bool
    summary: str
    figures: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "summary": self.summary, "figures": self.figures}


def exit_check(returncode: int | None, seconds: float, limit: float) -> Check:
    """main_ppo exited 0 within the time limit."""
    figures = {"returncode": returncode, "seconds": round(seconds, 1), "limit_s": limit}
    if returncode is None:
        return Check(
            name="exit", ok=False, summary=f"still running after {limit:g}s: stopped", figures=figures
        )
    ok = returncode == 0 and seconds <= limit
    return Check(
        name="exit",
        ok=ok,
        summary=f"exit {returncode} after {seconds:.0f}s (limit {limit:g}s)",
        figures=figures,
    )


def losses_check(metrics: dict[int, dict[str, float]], steps: int) -> Check:
    """Every step logged a finite actor/pg_loss and a finite actor/grad_norm above 0."""
    rows = {n: {k: metrics.get(n, {}).get(k) for k in (PG_LOSS, GRAD_NORM)} for n in range(1, steps + 1)}
    bad = [
        f"step {n}: "
        + ("not logged" if n not in metrics else f"pg_loss {r[PG_LOSS]}, grad_norm {r[GRAD_NORM]}")
        for n, r in rows.items()
        if n not in metrics
        or not finite(r[PG_LOSS])
        or not finite(r[GRAD_NORM])
        or not (r[GRAD_NORM] or 0) > 0
    ]
    figures = {str(n): r for n, r in rows.items()}
    if bad:
        return Check(name="losses", ok=False, summary="; ".join(bad), figures=figures)
    norms = ", ".join(f"{rows[n][GRAD_NORM]:.3g}" for n in rows)
    return Check(
        name="losses", ok=True, summary=f"{steps} steps, finite pg_loss, grad_norm {norms}", figures=figures
    )


def checkpoint_dir(root: Path, steps: int) -> Path:
    """Where verl saves the actor at the last step (trainer.default_local_dir/global_step_N/actor)."""
    return root / f"global_step_{steps}" / "actor"


def checkpoint_check(actor: Path) -> Check:
    """The actor checkpoint holds model and optimizer shards and Hugging Face safetensors."""
    found = {
        "model": sorted(p.name for p in actor.glob("model_*.pt")),
        "optimizer": sorted(p.name for p in actor.glob("optim_*.pt")),
        "hf_weights": sorted(p.name for p in (actor / "huggingface").glob("*.safetensors")),
    }
    missing = [k for k, v in found.items() if not v]
    if missing:
        where = str(actor) if actor.is_dir() else f"{actor} (no such folder)"
        return Check(
            name="checkpoint", ok=False, summary=f"no {', '.join(missing)} in {where}", figures=found
        )
    return Check(
        name="checkpoint", ok=True, summary=f"model, optimizer and HF weights in {actor}", figures=found
    )


def weights_check(initial: Path, saved: Path) -> Check:
    """The saved Hugging Face weights differ from the initial model's, tensor by tensor."""
    before = _all_tensors(initial)
    after = _all_tensors(saved)
    common = sorted(set(before) & set(after))
    moved = [n for n in common if changed(before[n], after[n])]
    figures = {"tensors": len(common), "changed": len(moved)}
    if not common:
        return Check(
            name="weights",
            ok=False,
            summary=f"no tensor names shared by {initial} and {saved}",
            figures=figures,
        )
    ok = len(moved) > 0
    return Check(
        name="weights", ok=ok, summary=f"{len(moved)} of {len(common)} tensors changed", figures=figures
    )


def sync_check(metrics: dict[int, dict[str, float]], steps: int, threshold: float) -> Check:
    """The rollout's log-probs match the actor's on every step: the weight sync is real."""
    values = {n: metrics.get(n, {}).get(PROBS_DIFF) for n in range(1, steps + 1)}
    figures = {"threshold": threshold, **{str(n): v for n, v in values.items()}}
    bad = [n for n, v in values.items() if not finite(v) or (v or 0.0) >= threshold]
    shown = ", ".join("-" if v is None else f"{v:.2g}" for v in values.values())
    if bad:
        return Check(
            name="weight sync",
            ok=False,
            summary=f"{PROBS_DIFF} {shown}, not all below {threshold:g}",
            figures=figures,
        )
    return Check(
        name="weight sync", ok=True, summary=f"{PROBS_DIFF} {shown} < {threshold:g}", figures=figures
    )


def _all_tensors(folder: Path) -> dict[str, tuple[str, bytes]]:
    found: dict[str, tuple[str, bytes]] = {}
    for file in sorted(folder.glob("*.safetensors")):
        found.update(tensors(file))
    return found
