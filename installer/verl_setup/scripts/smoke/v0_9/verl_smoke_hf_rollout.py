"""An `hf` rollout for verl 0.9: one Ray actor that generates with transformers, token in, token out.

verl 0.9.1 registers only vLLM, SGLang and TRT-LLM rollouts (verl/workers/rollout/base.py:89-93,
replica.py:388-390), and its HFRollout cannot be instantiated (hf_rollout.py:39-41). This adds,
under the name `hf`: HFServer (the Ray actor the agent loop sends prompts to, returning the sampled
tokens with their log-probs), HFReplica (starts it, as vLLMReplica starts vLLMHttpServer) and
HFServerAdapter (the rollout inside the trainer's worker: it hands the actor's weights to HFServer
after each update, so the rollout serves the policy being trained).

Runs in the target env (loaded by VERL_USE_EXTERNAL_MODULES); it uses verl's private registries,
so it is kept per verl minor (scripts/smoke/v0_9 for 0.9.x).
"""

import asyncio
import os
import sys

import ray
import torch
from verl.workers.rollout import base as rollout_base
from verl.workers.rollout.base import BaseRollout
from verl.workers.rollout.replica import RolloutReplica, RolloutReplicaRegistry, TokenOutput

MARK = "verl-setup-smoke:"
NAME = "hf"


def _say(text):
    print(f"{MARK} {text}", file=sys.stderr, flush=True)


def _server_name(replica_rank):
    return f"hf_server_{replica_rank}_0"


class HFServer:
    """The model in eval mode, generating one request at a time."""

    def __init__(self, config, model_config, replica_rank):
        from transformers import AutoModelForCausalLM

        self.config = config
        self.replica_rank = replica_rank
        path = getattr(model_config, "local_path", None) or model_config.path
        self.model = AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.float32).eval()
        self.eos = self.model.generation_config.eos_token_id
        self.eos = set(self.eos if isinstance(self.eos, list) else [self.eos] if self.eos is not None else [])
        self.lock = asyncio.Lock()
        self.global_steps = None
        self.updates = 0
        _say(f"rollout server ready (replica {replica_rank}, {path})")

    def ready(self):
        return True

    def get_server_address(self):
        return "127.0.0.1", 0

    async def generate(self, prompt_ids, sampling_params, request_id, **_unused):
        """Sample up to response_length tokens; the log-prob of each is log_softmax(logits / T)."""
        async with self.lock:
            return self._generate(list(prompt_ids), dict(sampling_params))

    @torch.no_grad()
    def _generate(self, prompt_ids, params):
        temperature = float(params.get("temperature", 1.0))
        top_k = int(params.get("top_k", -1) or -1)
        top_p = float(params.get("top_p", 1.0))
        limit = int(params.get("max_tokens") or self.config.response_length)
        ids = torch.tensor([prompt_ids], dtype=torch.long)
        tokens, logprobs, past = [], [], None
        step_input = ids
        stop = None
        for _ in range(limit):
            out = self.model(input_ids=step_input, past_key_values=past, use_cache=True)
            past = out.past_key_values
            logits = out.logits[0, -1].float()
            if temperature <= 0:
                token = int(torch.argmax(logits))
                logprob = 0.0
            else:
                logits = logits / temperature
                full = torch.log_softmax(logits, dim=-1)
                filtered = logits.clone()
                if top_k > 0:
                    kth = torch.topk(filtered, min(top_k, filtered.numel())).values[-1]
                    filtered[filtered < kth] = float("-inf")
                if top_p < 1.0:
                    order = torch.argsort(filtered, descending=True)
                    cum = torch.cumsum(torch.softmax(filtered[order], dim=-1), dim=-1)
                    drop = order[(cum - torch.softmax(filtered[order], dim=-1)) > top_p]
                    filtered[drop] = float("-inf")
                token = int(torch.multinomial(torch.softmax(filtered, dim=-1), 1))
                logprob = float(full[token])
            tokens.append(token)
            logprobs.append(logprob)
            if token in self.eos:
                stop = "completed"
                break
            step_input = torch.tensor([[token]], dtype=torch.long)
        return TokenOutput(
            token_ids=tokens,
            log_probs=logprobs if params.get("logprobs") else None,
            stop_reason=stop or "completed",
            extra_fields={"global_steps": self.global_steps},
        )

    def update_weights(self, state):
        """Load the trainer's weights (HF names); every tensor must land in the model."""
        own = self.model.state_dict()
        unknown = [name for name in state if name not in own]
        if unknown:
            raise KeyError(f"weights the rollout model does not have: {unknown[:5]}")
        self.model.load_state_dict(state, strict=False)
        self.updates += 1
        if self.updates == 1:
            _say(f"weights synced to the rollout ({len(state)} tensors)")
        return len(state)

    def set_global_steps(self, global_steps):
        self.global_steps = global_steps

    def wake_up(self, tags=None):
        return None

    def sleep(self):
        return None

    def clear_kv_cache(self):
        return None

    def release_kv_cache(self):
        return None

    def resume_kv_cache(self):
        return None

    def wait_for_requests_to_drain(self):
        return None

    def abort_all_requests(self, reset_prefix_cache=True, reject_request=False):
        return {"aborted_count": 0, "request_ids": []}

    def abort_request(self, request_id, reset_prefix_cache=True):
        return {"aborted": False, "request_id": request_id}

    def resume_generation(self):
        return None

    def start_profile(self, **kwargs):
        return None

    def stop_profile(self):
        return None


class HFReplica(RolloutReplica):
    """One HFServer per replica, on the node of the replica's first worker."""

    async def launch_servers(self):
        _say(f"rollout start (replica {self.replica_rank})")
        node_id = None
        if self.workers:
            node_id = await self.workers[0].__ray_call__.remote(
                lambda _: ray.get_runtime_context().get_node_id()
            )
        options = {
            "name": _server_name(self.replica_rank),
            "num_cpus": 0,
            "max_concurrency": self.max_concurrency,
        }
        if node_id is not None:
            options["scheduling_strategy"] = ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy(
                node_id=node_id, soft=False
            )
        server = (
            ray.remote(HFServer).options(**options).remote(self.config, self.model_config, self.replica_rank)
        )
        await server.ready.remote()
        self.servers.append(server)
        self._server_handle = server
        self._server_address = "127.0.0.1:0"

    def rollout_worker_use_gpu(self):
        return False


class HFServerAdapter(BaseRollout):
    """The rollout in the trainer's worker: sends each weight update to its HFServer."""

    def __init__(self, config, model_config, device_mesh, replica_rank=-1):
        super().__init__(config, model_config, device_mesh)
        rank = int(os.environ.get("RANK", "0"))
        size = self.config.tensor_model_parallel_size * self.config.data_parallel_size
        size *= self.config.pipeline_model_parallel_size
        self.replica_rank = rank // size if replica_rank == -1 else replica_rank
        self.rollout_rank = rank % size
        self.server = None

    def _server(self):
        if self.server is None:
            self.server = ray.get_actor(_server_name(self.replica_rank))
        return self.server

    async def resume(self, tags):
        return None

    async def release(self):
        return None

    @torch.no_grad()
    async def update_weights(self, weights, global_steps=None, wire_format="named_tensors", **kwargs):
        assert wire_format == "named_tensors", f"the hf rollout takes full tensors, not {wire_format!r}"
        state = {}
        for name, tensor in weights:
            full = tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor
            state[name] = full.detach().to("cpu", torch.float32).clone()
        if self.rollout_rank != 0:
            return
        server = self._server()
        await server.update_weights.remote(state)
        if global_steps is not None:
            await server.set_global_steps.remote(global_steps)


rollout_base._ROLLOUT_REGISTRY[(NAME, "async")] = f"{__name__}.HFServerAdapter"
RolloutReplicaRegistry.register(NAME, lambda: HFReplica)
