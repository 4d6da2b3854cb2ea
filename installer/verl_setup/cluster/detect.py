"""detect --ray: `detect --json` on every alive node of a Ray cluster, gathered into a cluster file.

The tool reaches the nodes in one of two ways. By default the driver ships this very package
with Ray's runtime environment (`py_modules`), so the nodes need nothing but Ray (detection uses
the standard library and PyYAML, which Ray itself requires). With `installed`, each node runs its
own `verl-setup detect --json` from PATH. A rendered runtime_env.yaml (`--runtime-env`) is
honoured for what reaches the workers (py_executable, env_vars); its working_dir is not uploaded
for detection.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from verl_setup.cluster.ray_tasks import run_on_every_node
from verl_setup.errors import BadInputError
from verl_setup.host.cluster_file import Cluster, ClusterNode, MissingNode, now
from verl_setup.host.facts import host_from_data
from verl_setup.util.bounded import one_line
from verl_setup.util.paths import data_dir

Reach = Literal["py_modules", "installed"]
DATA = ("matrices", "templates")


@contextmanager
def shipped_package() -> Iterator[Path]:
    """This package's folder as Ray's py_modules uploads it, with matrices/ and templates/ inside.

    A wheel has them in `_data/`; an editable install keeps them beside the source, so a copy
    with them put in `_data/` is shipped instead (about 1.3 MB)."""
    package = Path(__file__).resolve().parents[1]
    if all((package / "_data" / name).is_dir() for name in DATA):
        yield package
        return
    with tempfile.TemporaryDirectory(prefix="verl-setup-ship-") as tmp:
        copy = Path(tmp) / package.name
        shutil.copytree(package, copy, ignore=shutil.ignore_patterns("__pycache__"))
        for name in DATA:
            shutil.copytree(data_dir(name), copy / "_data" / name)
        yield copy


def runtime_env_for(package: Path | None, rendered: Mapping[str, Any] | None) -> dict[str, Any]:
    """The tasks' runtime env: the rendered one's worker settings, plus the package (py_modules)."""
    env: dict[str, Any] = {}
    for key in ("py_executable", "env_vars", "conda", "container", "image_uri"):
        if rendered and key in rendered:
            env[key] = rendered[key]
    if package is not None:
        env["py_modules"] = [*(rendered or {}).get("py_modules", []), str(package)]
    return env


def load_runtime_env(path: Path) -> dict[str, Any]:
    """A runtime_env.yaml (as `render ray` writes it), read as data."""
    from verl_setup.util.yamlread import YamlError, read_yaml  # noqa: PLC0415

    try:
        data, _ = read_yaml(path)
    except YamlError as exc:
        raise BadInputError(f"runtime env: {exc}") from exc
    if not isinstance(data, dict):
        raise BadInputError(f"runtime env {one_line(str(path))!r}: expected a mapping")
    return dict(data)


def detect_cluster(
    python: Path,
    address: str,
    *,
    reach: Reach,
    timeout: float,
    env: Mapping[str, str],
    rendered: Mapping[str, Any] | None = None,
) -> Cluster:
    """Every alive node's facts; a node whose task failed or timed out, or that is dead, is missing."""
    with shipped_package() as package:
        answers = run_on_every_node(
            python,
            address,
            ("ray_task_detect", "_probe"),
            timeout=timeout,
            env=env,
            what="detect",
            runtime_env=runtime_env_for(package if reach == "py_modules" else None, rendered),
            args=(reach, address.rsplit(":", 1)[0].strip("[]")),
        )
    nodes, missing = [], []
    for entry in answers.nodes:
        probe = entry.get("probe")
        if probe is None:
            missing.append(MissingNode(name=entry["node_id"], ip=entry["ip"], reason=entry["error"]))
            continue
        host = host_from_data(json.loads(json.dumps(probe["host"])), f"Ray node {entry['node_id']}")
        nodes.append(
            ClusterNode(
                name=entry["node_id"],
                ip=entry["ip"],
                hostname=probe["hostname"],
                head=entry["head"],
                host=host,
                iface_to_head=probe.get("iface_to_head"),
            )
        )
    missing += [MissingNode(name=d["node_id"], ip=d["ip"], reason=d["reason"]) for d in answers.dead]
    return Cluster(
        nodes=tuple(nodes), missing=tuple(missing), how="ray", address=address, gathered_at=now(), tool=reach
    )
