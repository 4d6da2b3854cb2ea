"""The training-memory planner: per GPU, what each phase of a verl step holds, term by term, each an
estimate with its formula.

A colocated verl step runs three phases on every GPU, and the peak is the largest:
- rollout: the engine claims gpu_memory_utilization of the whole GPU (weights and KV cache), beside
  whatever the training roles keep resident (what is not offloaded);
- actor update (and critic update): the role's FSDP shards of fp32 parameters, fp32 gradients and
  Adam's two fp32 moments (4 + 4 + 8 B per parameter over the FSDP group), one gathered layer, the
  micro-batch's activations and fp32 logits, beside the other roles' resident shards and, unless
  free_cache_engine (sleep mode) releases it, the engine's reservation.
verl offloads (param_offload, optimizer_offload) between phases: a role's own update still loads its
state, so offload lowers what sits beside the phase that is running, not the phase itself.
Megatron: weights bf16 and fp32 main gradients over TP x PP (experts over EP x expert-TP x PP), the
distributed optimizer's 12 B per parameter over data parallel as well.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from verl_setup.doctor.checks.memory.shape import ModelShape

GIB = 1024**3
OVERHEAD = int(1.5 * GIB)  # CUDA context, NCCL buffers and allocator slack per GPU (an allowance)
USABLE = 0.97  # of each GPU's memory: torch's caching allocator fragments the rest
ACT_PER_TOKEN_HIDDEN = 34  # bytes per token per hidden unit of one layer (Korthikanti et al. 2022)
RAY_KILL_AT = 0.95
LOGIT_BYTES = 10  # per token per vocabulary entry: 2 (bf16 logits) + 4 (fp32 copy) + 4 (log-softmax)
VARIABLE = ("activations", "logits")  # the terms that scale with the tokens of a micro-batch

Get = Callable[[str], Any]


@dataclass(frozen=True, kw_only=True)
class Role:
    """One FSDP role's placement: present, offloaded, trainable."""

    present: bool
    trainable: bool
    param_offload: bool = False
    optimizer_offload: bool = False


@dataclass(frozen=True, kw_only=True)
class Setup:
    """Everything the estimate reads: the model, the cluster, and the launch's memory knobs."""

    shape: ModelShape
    gpu_bytes: int
    gpus_per_node: int
    nnodes: int = 1
    host_bytes: int | None = None
    strategy: str = "fsdp"
    actor: Role
    ref: Role
    critic: Role
    fsdp_size: int = -1
    ulysses: int = 1
    micro_batch: int = 1
    tokens_per_gpu: int | None = None  # use_dynamic_bsz: ppo_max_token_len_per_gpu
    prompt_len: int = 512
    response_len: int = 512
    checkpointing: bool = False
    remove_padding: bool = False  # micro-batches hold the real tokens only: max lengths are a bound
    utilization: float = 0.5
    free_cache_engine: bool = True
    rollout_tp: int = 1
    tp: int = 1
    pp: int = 1
    ep: int = 1
    etp: int | None = None

    @property
    def world(self) -> int:
        """GPUs in the job."""
        return self.gpus_per_node * self.nnodes


@dataclass(frozen=True, kw_only=True)
class Term:
    """One estimated allocation on a GPU: what, how much, and the formula that gave it."""

    name: str
    bytes: int
    formula: str


@dataclass(frozen=True, kw_only=True)
class Phase:
    """What one phase of a step holds on each GPU."""

    name: str
    terms: tuple[Term, ...]

    @property
    def total(self) -> int:
        """The phase's bytes per GPU."""
        return sum(t.bytes for t in self.terms)

    @property
    def dominant(self) -> Term:
        """The largest term."""
        return max(self.terms, key=lambda t: t.bytes)


@dataclass(frozen=True, kw_only=True)
class Estimate:
    """The phases, the peak one, and the host memory offload takes per node."""

    setup: Setup
    phases: tuple[Phase, ...]
    host_terms: tuple[Term, ...] = field(default_factory=tuple)

    @property
    def peak(self) -> Phase:
        """The phase that needs the most."""
        return max(self.phases, key=lambda p: p.total)

    @property
    def limit(self) -> int:
        """What a GPU offers: its memory less the allocator's fragmentation."""
        return int(self.setup.gpu_bytes * USABLE)

    @property
    def fits(self) -> bool:
        """The peak phase within the usable GPU memory."""
        return self.peak.total <= self.limit

    def tokens_that_fit(self) -> int:
        """Tokens per micro-batch at which the tightest training phase just fits (0: none do)."""
        tokens, _ = _tokens(self.setup)
        worst = 1.0
        for phase in self.phases:
            variable = sum(t.bytes for t in phase.terms if t.name in VARIABLE)
            if not variable:
                if phase.total > self.limit:
                    return 0
                continue
            room = self.limit - (phase.total - variable)
            worst = min(worst, room / variable)
        return max(0, int(tokens * worst))

    @property
    def verdict(self) -> str:
        """ "fits"; "fits-if-shorter" when remove-padding packs real tokens and only sequences near the
        maximum lengths would not fit; else "does-not-fit"."""
        if self.fits:
            return "fits"
        s = self.setup
        if s.remove_padding and not s.tokens_per_gpu and self.tokens_that_fit() > 0:
            return "fits-if-shorter"
        return "does-not-fit"

    @property
    def host_total(self) -> int:
        """Host bytes per node that offloaded state and sleeping engines take."""
        return sum(t.bytes for t in self.host_terms)


def gib(n: float) -> str:
    """Bytes as GiB with one decimal."""
    return f"{n / GIB:.1f} GiB"


def _state(s: Setup, role: Role, name: str) -> list[Term]:
    """A role's parameter, gradient and optimizer shards on one GPU (FSDP or Megatron)."""
    n, world = s.shape.params, s.world
    if s.strategy == "megatron":
        etp = s.etp or s.tp
        dense = s.shape.dense_params // (s.tp * s.pp)
        expert = s.shape.expert_params // (s.ep * etp * s.pp)
        local = dense + expert
        dp = max(1, world // (s.tp * s.pp))
        edp = max(1, world // (s.ep * etp * s.pp))
        split = f"dense {s.shape.dense_params / 1e9:.2f}B / (TP {s.tp} x PP {s.pp})" + (
            f" + experts {s.shape.expert_params / 1e9:.2f}B / (EP {s.ep} x ETP {etp} x PP {s.pp})"
            if expert
            else ""
        )
        terms = [Term(name=f"{name} weights", bytes=local * 2, formula=f"2 B x ({split})")]
        if role.trainable:
            terms.append(
                Term(name=f"{name} grads", bytes=local * 4, formula=f"4 B (fp32 main grads) x ({split})")
            )
            opt = dense * 12 // dp + expert * 12 // edp
            terms.append(
                Term(
                    name=f"{name} optimizer",
                    bytes=opt,
                    formula=f"12 B (fp32 master + Adam m, v) x local params / DP {dp}"
                    + (f" (experts / expert-DP {edp})" if expert else "")
                    + " (distributed optimizer)",
                )
            )
        return terms
    group = world if s.fsdp_size <= 0 else min(s.fsdp_size, world)
    if not role.trainable:
        return [
            Term(
                name=f"{name} params",
                bytes=n * 2 // group,
                formula=f"2 B (bf16) x {n / 1e9:.2f}B / FSDP {group}",
            )
        ]
    return [
        Term(
            name=f"{name} params", bytes=n * 4 // group, formula=f"4 B (fp32) x {n / 1e9:.2f}B / FSDP {group}"
        ),
        Term(
            name=f"{name} grads", bytes=n * 4 // group, formula=f"4 B (fp32) x {n / 1e9:.2f}B / FSDP {group}"
        ),
        Term(
            name=f"{name} Adam",
            bytes=n * 8 // group,
            formula=f"8 B (fp32 m, v) x {n / 1e9:.2f}B / FSDP {group}",
        ),
    ]


def _resident(s: Setup, role: Role, name: str) -> list[Term]:
    """What a role leaves on the GPU while another phase runs (offloaded parts are on the host)."""
    if not role.present:
        return []
    kept = []
    for t in _state(s, role, name):
        offloaded = role.optimizer_offload if t.name.endswith(("Adam", "optimizer")) else role.param_offload
        if not offloaded:
            kept.append(replace(t, name=f"{t.name} (resident)"))
    return kept


def _tokens(s: Setup) -> tuple[int, str]:
    seq = s.prompt_len + s.response_len
    if s.tokens_per_gpu:
        return s.tokens_per_gpu, f"ppo_max_token_len_per_gpu {s.tokens_per_gpu}"
    return s.micro_batch * seq, f"micro-batch {s.micro_batch} x {seq} tokens"


def _activations(s: Setup, *, logits: bool) -> list[Term]:
    tokens, what = _tokens(s)
    split = s.ulysses * (s.tp if s.strategy == "megatron" else 1)
    h, layers = s.shape.hidden, s.shape.layers
    one_layer = tokens * h * ACT_PER_TOKEN_HIDDEN // split
    if s.checkpointing:
        act = layers * tokens * h * 2 // split + one_layer
        formula = f"{layers} layers x {what} x hidden {h} x 2 B (checkpointed inputs) + one layer x 34 B"
    else:
        act = layers * one_layer
        formula = f"{layers} layers x {what} x hidden {h} x 34 B (no gradient checkpointing)"
    if split > 1:
        formula += f", / {split} (sequence split)"
    terms = [Term(name="activations", bytes=act, formula=formula)]
    if logits:
        terms.append(
            Term(
                name="logits",
                bytes=tokens * s.shape.vocab * LOGIT_BYTES // split,
                formula=f"{what} x vocab {s.shape.vocab} x {LOGIT_BYTES} B (bf16 logits, their fp32 copy and "
                "fp32 log-softmax)",
            )
        )
    return terms


def _engine(s: Setup) -> Term:
    return Term(
        name="rollout engine",
        bytes=int(s.utilization * s.gpu_bytes),
        formula=f"gpu_memory_utilization {s.utilization} x {gib(s.gpu_bytes)} (weights + KV cache)",
    )


def estimate(s: Setup) -> Estimate:
    """Every phase of one step on one GPU, and the host memory per node."""
    overhead = Term(name="CUDA context and buffers", bytes=OVERHEAD, formula="an allowance of 1.5 GiB")
    roles = {"actor": s.actor, "ref": s.ref, "critic": s.critic}
    rollout = [_engine(s), overhead]
    for name, role in roles.items():
        rollout += _resident(s, role, name)
    phases = [Phase(name="rollout", terms=tuple(rollout))]
    layer = s.shape.layer_params
    gathered = Term(
        name="gathered layer", bytes=layer * 4, formula=f"2 layers x {layer / 1e6:.0f}M params x 2 B"
    )
    for name in ("actor", "critic"):
        role = roles[name]
        if not role.present:
            continue
        terms = [*_state(s, role, name), overhead]
        if s.strategy != "megatron":
            terms.append(gathered)
        terms += _activations(s, logits=name == "actor")
        for other, orole in roles.items():
            if other != name:
                terms += _resident(s, orole, other)
        if not s.free_cache_engine:
            terms.append(replace(_engine(s), name="rollout engine (free_cache_engine=False keeps it)"))
        phases.append(Phase(name=f"{name} update", terms=tuple(terms)))
    return Estimate(setup=s, phases=tuple(phases), host_terms=tuple(_host(s, roles)))


def _host(s: Setup, roles: dict[str, Role]) -> list[Term]:
    per_node = s.gpus_per_node
    terms = []
    for name, role in roles.items():
        if not role.present:
            continue
        for t in _state(s, role, name):
            offloaded = (
                role.optimizer_offload if t.name.endswith(("Adam", "optimizer")) else role.param_offload
            )
            if offloaded:
                terms.append(
                    Term(
                        name=f"{t.name} offloaded",
                        bytes=t.bytes * per_node,
                        formula=f"{t.formula} x {per_node} GPUs per node",
                    )
                )
    if s.free_cache_engine:
        weights = s.shape.params * 2 // max(1, s.rollout_tp)
        terms.append(
            Term(
                name="sleeping engine weights",
                bytes=weights * per_node,
                formula=f"2 B x {s.shape.params / 1e9:.2f}B / rollout TP {s.rollout_tp} x {per_node} GPUs "
                "per node "
                "(vLLM sleep mode level 1 keeps the weights in host memory)",
            )
        )
    return terms
