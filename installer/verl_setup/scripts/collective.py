"""Run as a script in the target env (Ray and torch there): one all-reduce and all-gather, print JSON.

One Ray actor per GPU (or one per alive node without GPUs), each pinned to its node, joins a
torch.distributed group (NCCL with GPUs, gloo without) and reports its own environment, so a
variable set in the shell but not in the workers shows. The parent SIGKILLs this process when
its hard timeout passes; every wait here has its own shorter timeout.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from verl_setup.scripts.ray_script import failure, run
else:  # run as a script in the target env: this folder is first on sys.path
    from ray_script import failure, run

PREFIXES = ("NCCL_", "GLOO_", "MASTER_", "TORCH_")


def member(
    rank: int, world: int, backend: str, seconds: float, paths: list[str], *, sized: tuple[int, float]
) -> Any:
    """The actor class (defined inside: Ray and torch are imported only in the target env)."""
    import ray

    @ray.remote(num_cpus=0)
    class Member:
        def hello(self) -> dict[str, Any]:
            env = {k: v for k, v in os.environ.items() if k.startswith(PREFIXES)}
            node_ip = ray.util.get_node_ip_address()  # type: ignore[no-untyped-call, unused-ignore]
            node = ray.get_runtime_context().get_node_id()
            seen = {p: os.path.exists(p) for p in paths}  # the launch's local paths
            return {"node_ip": node_ip, "node": node, "host": socket.gethostname(), "env": env, "paths": seen}

        def free_port(self) -> int:
            with socket.socket() as s:
                s.bind(("", 0))
                return int(s.getsockname()[1])

        def run(self, master: str, port: int) -> dict[str, Any]:
            import datetime

            log_file = f"/tmp/verl-setup-nccl-{os.getpid()}.log"  # noqa: S108  # read back below
            if backend == "nccl":
                os.environ["NCCL_DEBUG"] = "INFO"
                os.environ["NCCL_DEBUG_FILE"] = log_file
            started = time.monotonic()
            out: dict[str, Any] = {"rank": rank}
            try:
                import torch  # type: ignore[import-not-found, unused-ignore]
                import torch.distributed as dist  # type: ignore[import-not-found, unused-ignore]

                device = "cpu"
                if backend == "nccl":
                    torch.cuda.set_device(0)  # Ray's CUDA_VISIBLE_DEVICES holds this actor's GPU
                    device = "cuda"
                dist.init_process_group(
                    backend,
                    init_method=f"tcp://{master}:{port}",
                    rank=rank,
                    world_size=world,
                    timeout=datetime.timedelta(seconds=seconds),
                )
                total = torch.ones(4, device=device) * (rank + 1)
                dist.all_reduce(total)
                gathered = [torch.zeros(1, device=device) for _ in range(world)]
                dist.all_gather(gathered, torch.tensor([float(rank)], device=device))
                out["all_reduce"] = float(total[0].item())
                out["all_gather"] = [float(t.item()) for t in gathered]
                numel, limit = sized
                if numel:
                    # The run's bucket: each rank holds numel/world, all-gathers numel (2-byte dtype).
                    dtype = torch.bfloat16 if backend == "nccl" else torch.float16
                    shard = torch.ones(max(1, numel // world), dtype=dtype, device=device)
                    whole = torch.empty(shard.numel() * world, dtype=dtype, device=device)
                    dist.barrier()
                    t0 = time.monotonic()
                    work = dist.all_gather_into_tensor(whole, shard, async_op=True)
                    work.wait(timeout=datetime.timedelta(seconds=limit))
                    if backend == "nccl":
                        torch.cuda.synchronize()
                    out["sized_seconds"] = round(time.monotonic() - t0, 3)
                    del shard, whole
                dist.destroy_process_group()
                out["ok"] = True
            except Exception as exc:  # every failure is the finding
                out["ok"] = False
                out["error"] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc) else ''}"
                if "all_reduce" in out:  # the small collective passed: only the sized one failed
                    out["ok"] = True
                    out["sized_error"] = out.pop("error")
            out["seconds"] = round(time.monotonic() - started, 2)
            try:
                log_path = Path(log_file)
                out["nccl_log"] = log_path.read_text(encoding="utf-8", errors="replace")[-20000:]
                log_path.unlink()
            except OSError:
                out["nccl_log"] = ""
            return out

    return Member


def collective(args: dict[str, Any], out: dict[str, Any]) -> None:
    """One actor per GPU (or per node without GPUs) joins the group, all-reduces and all-gathers."""
    seconds = float(args["timeout"])
    out["python"] = sys.executable
    import ray
    import torch  # noqa: F401  # fail here, not in every actor
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    address = args.get("address")
    try:
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _temp_dir=args["temp_dir"])
    except Exception as exc:  # Ray that cannot start or join fails the check
        out["init_error"] = failure(exc)
        return
    nodes = [n for n in ray.nodes() if n.get("Alive")]  # type: ignore[no-untyped-call, unused-ignore]
    gpu = any(n.get("Resources", {}).get("GPU", 0) >= 1 for n in nodes) and not args.get("gloo")
    places: list[str] = []
    for node in nodes:
        gpus = int(node.get("Resources", {}).get("GPU", 0))
        places += [node["NodeID"]] * (gpus if gpu else 1)
    backend = "nccl" if gpu else "gloo"
    world = len(places)
    out.update(backend=backend, world=world, nodes=len(nodes))
    actors = []
    for rank, node_id in enumerate(places):
        sized = (int(args.get("numel") or 0), float(args.get("sized_timeout") or 0) or seconds)
        cls = member(rank, world, backend, seconds, list(args.get("paths") or []), sized=sized)
        options: dict[str, Any] = {
            "scheduling_strategy": NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)
        }
        if backend == "nccl":
            options["num_gpus"] = 1
        actors.append(cls.options(**options).remote())
    out["members"] = ray.get([a.hello.remote() for a in actors], timeout=seconds)
    master = out["members"][0]["node_ip"]
    port = int(os.environ.get("MASTER_PORT") or ray.get(actors[0].free_port.remote(), timeout=seconds))
    out["master"] = f"{master}:{port}"
    refs = [a.run.remote(master, port) for a in actors]
    wait = seconds + 10 + min(float(args.get("sized_timeout") or 0), 900.0)
    ready, _ = ray.wait(refs, num_returns=len(refs), timeout=wait)
    out["results"] = [
        ray.get(ref)
        if ref in ready
        else {"rank": rank, "ok": False, "error": "hung: no answer", "seconds": seconds + 10}
        for rank, ref in enumerate(refs)
    ]
    for actor in actors:
        ray.kill(actor)


if __name__ == "__main__":
    run(collective)
