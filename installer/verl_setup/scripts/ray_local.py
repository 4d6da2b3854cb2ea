"""Run as a script in the target env: start a throwaway Ray as verl's ray.init() would, print JSON.

It places one bundle per requested GPU with verl's CPUs per bundle ({"CPU": n, "GPU": 1}; logical
GPUs where the machine has none) and starts one actor in each. The parent SIGKILLs this process
at its hard timeout; here every wait has a shorter one.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from verl_setup.scripts.ray_script import failure, run
else:  # run as a script in the target env: this folder is first on sys.path
    from ray_script import failure, run


def throwaway_ray(args: dict[str, Any], out: dict[str, Any]) -> None:
    """Start Ray as verl would, place one bundle per GPU and one actor in each."""
    import ray
    from ray._private.utils import get_num_cpus
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    out["ray_counts_cpus"] = get_num_cpus()
    started = time.monotonic()
    init: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "_temp_dir": args["temp_dir"]}
    if args.get("num_cpus") is not None:
        init["num_cpus"] = args["num_cpus"]
    if args["gpus"]:
        init["num_gpus"] = args["gpus"]
    try:
        ray.init(**init)
    except Exception as exc:  # registration timeouts and the like are the finding
        out["init_error"] = failure(exc)
        return
    out["init_seconds"] = round(time.monotonic() - started, 2)
    resources = ray.cluster_resources()  # type: ignore[no-untyped-call, unused-ignore]
    out["cpus"] = resources.get("CPU", 0)
    out["gpus"] = resources.get("GPU", 0)
    if not args["gpus"]:
        return
    bundle = {"CPU": args["per_bundle"], "GPU": 1}
    pg = placement_group([dict(bundle) for _ in range(args["gpus"])], strategy="PACK")
    ready, _ = ray.wait([pg.ready()], timeout=args["timeout"])
    out["placement"] = {"bundles": args["gpus"], "per_bundle": bundle, "ready": bool(ready)}
    if ready:

        @ray.remote(num_cpus=0, num_gpus=1)  # type: ignore[untyped-decorator, unused-ignore]  # ray absent: Any
        def where() -> str:
            return str(ray.get_runtime_context().get_node_id())

        refs = [
            where.options(
                scheduling_strategy=PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=i)
            ).remote()
            for i in range(args["gpus"])
        ]
        done, _ = ray.wait(refs, num_returns=len(refs), timeout=args["timeout"])
        out["actors"] = len(done)
    remove_placement_group(pg)


if __name__ == "__main__":
    run(throwaway_ray)
