"""The user's packages (--with, --with-requirements, --with-editable, the team config's with*):
parsed in uv's words, added after the row in a step of their own that asks for every row pin
again, refused in one line when a row pin excludes them, and a verl checkout's version picks the
row's verl line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import json_data, run_cli
from verl_setup.environment.user_verify import user_warnings
from verl_setup.environment.verify import Dist, Expected, Snapshot, compare
from verl_setup.errors import BadInputError
from verl_setup.plan.recipe import build_recipe
from verl_setup.plan.select import Plan
from verl_setup.plan.user_packages import collect, parse_with, read_requirements
from verl_setup.plan.verl_source import at_commit, split_ref

H100 = ("--gpu", "H100", "--driver", "580.95.05")


def checkout(root: Path, version: str, name: str = "verl") -> Path:
    """A project folder as verl's checkout lays it out: pyproject name, verl/version/version."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text(f'[project]\nname = "{name}"\ndynamic = ["version"]\n')
    (root / "verl" / "version").mkdir(parents=True, exist_ok=True)
    (root / "verl" / "version" / "version").write_text(version + "\n")
    return root


def test_with_reads_pep508_git_urls_and_local_paths(tmp_path: Path) -> None:
    assert parse_with("word2number==1.1", "--with").specifier == "==1.1"
    git = parse_with("verl @ git+file:///srv/verl@main", "--with")
    assert (git.kind, git.name, git.url) == ("git", "verl", "git+file:///srv/verl@main")
    local = parse_with(str(checkout(tmp_path / "co", "0.9.1")), "--with")
    assert (local.kind, local.editable, local.name) == ("path", True, "verl")
    assert local.uv_args() == ["-e", str(tmp_path / "co")]


def test_a_bad_requirement_is_one_line() -> None:
    with pytest.raises(BadInputError, match=r"^--with 'numpy<<2': not a requirement uv reads"):
        parse_with("numpy<<2", "--with")


def test_requirements_file_takes_comments_and_editables(tmp_path: Path) -> None:
    checkout(tmp_path / "mine", "1.0", name="my-reward")
    req = tmp_path / "req.txt"
    req.write_text("# ours\ntabulate  # tables\n-e ./mine\n\n")
    got = read_requirements(req, "--with-requirements req.txt")
    assert [(r.name, r.kind, r.editable) for r in got] == [
        ("tabulate", "index", False),
        ("my-reward", "path", True),
    ]
    req.write_text("--index-url http://127.0.0.1/simple\n")
    with pytest.raises(BadInputError, match="option '--index-url"):
        read_requirements(req, "--with-requirements req.txt")


def test_one_package_asked_twice_differently_is_refused() -> None:
    with pytest.raises(BadInputError, match="numpy is asked for twice"):
        collect(with_=["numpy<2", "numpy>=2"], with_requirements=[], with_editable=[])


def test_team_config_lists_are_relative_to_the_file(tmp_path: Path) -> None:
    checkout(tmp_path / "pkgs" / "mine", "1.0", name="mine")
    config = tmp_path / "verl-setup.toml"
    got = collect(
        with_=[], with_requirements=[], with_editable=[],
        config={"with": ("tabulate",), "with_editable": ("pkgs/mine",)}, config_path=config,
    )  # fmt: skip
    assert [r.name for r in got.requirements] == ["tabulate", "mine"]
    assert got.requirements[1].path == tmp_path / "pkgs" / "mine"
    assert got.requirements[0].origin == f"config {config} (with)"


def test_git_ref_is_replaced_by_its_full_commit() -> None:
    sha = "c88ac084e5c27a72dc48a457de6df29171c70f61"
    assert split_ref("git+file:///srv/verl@v0.9.1") == ("file:///srv/verl", "v0.9.1")
    assert split_ref("git+https://host/org/verl") == ("https://host/org/verl", "")
    req = parse_with("verl[gpu] @ git+file:///srv/verl@v0.9.1", "--with")
    assert at_commit(req, sha) == f"verl[gpu] @ git+file:///srv/verl@{sha}"


@pytest.mark.subprocess  # install's dry run looks for the interpreter
def test_numpy_below_2_is_refused_naming_the_row_pin_and_a_row_that_accepts_it(tmp_path: Path) -> None:
    result = run_cli(
        "install", "--no-gpu", "--prefix", str(tmp_path / "env"), "--with", "numpy<2", "--dry-run"
    )
    assert result.code == 4, result.err
    (line,) = [ln for ln in result.err.splitlines() if ln.startswith("verl-setup: error")]
    assert "numpy<2 (--with) conflicts with row cpu's pin numpy==2.2.6" in line
    assert "evidence: uv; verl 0.9 requires numpy>=2" in line
    assert "pins numpy==1.26.4, which it accepts" in line
    assert not (tmp_path / "env").exists()


@pytest.mark.subprocess  # install's dry run looks for the interpreter
def test_the_user_step_comes_last_with_every_row_pin_again(tmp_path: Path) -> None:
    result = run_cli(
        "install", "--no-gpu", "--prefix", str(tmp_path / "env"), "--with", "tabulate",
        "--with", "word2number==1.1", "--dry-run", "--json",
    )  # fmt: skip
    assert result.code == 0, result.err
    data = json_data(result.out)
    last = data["commands"][-1]
    assert last["step"] == "with"
    assert "torch==2.11.0" in last["argv"]
    assert "numpy==2.2.6" in last["argv"]
    assert last["argv"][-2:] == ["tabulate", "word2number==1.1"]
    assert "--only-binary" not in last["argv"]  # word2number has no wheel: uv's default for theirs
    assert [w["name"] for w in data["with"]] == ["tabulate", "word2number"]


@pytest.mark.subprocess  # install's dry run looks for the interpreter
def test_team_config_with_reaches_the_install_dry_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "verl-setup.toml").write_text('with = ["tabulate"]\n')
    monkeypatch.chdir(tmp_path)
    data = json_data(run_cli("install", "--no-gpu", "--dry-run", "--json").out)
    assert data["with"][0]["name"] == "tabulate"
    assert data["with"][0]["origin"] == f"config {tmp_path / 'verl-setup.toml'} (with)"
    assert data["commands"][-1]["argv"][-1] == "tabulate"
    (tmp_path / "verl-setup.toml").write_text('with = "tabulate"\n')
    result = run_cli("install", "--no-gpu", "--dry-run", "--json")
    assert result.code == 2
    assert "with must be a list of non-empty strings" in result.err


@pytest.mark.subprocess  # install's dry run looks for the interpreter
def test_a_verl_checkout_replaces_the_row_verl_editable(tmp_path: Path) -> None:
    co = checkout(tmp_path / "verl", "0.9.1")
    result = run_cli(
        "install",
        "--no-gpu",
        "--prefix",
        str(tmp_path / "env"),
        "--with-editable",
        str(co),
        "--dry-run",
        "--json",
    )
    assert result.code == 0, result.err
    verl = next(c for c in json_data(result.out)["commands"] if c["step"] == "verl")
    assert verl["argv"][5:7] == ["-e", f"{co}[verl-core]"]
    assert not any(a.startswith("verl[") for a in verl["argv"])
    assert all(c["step"] != "with" for c in json_data(result.out)["commands"])


@pytest.mark.parametrize(
    ("version", "line"), [("0.7.1", "0.7"), ("0.9.1", "0.9")], ids=["checkout-0.7.1", "checkout-0.9.1"]
)
def test_the_checkout_version_chooses_the_verl_line(tmp_path: Path, version: str, line: str) -> None:
    co = checkout(tmp_path / "verl", version)
    result = run_cli("plan", *H100, "--with-editable", str(co), "--json")
    assert result.code == 0, result.err
    data = json.loads(result.out)["data"]
    assert data["row"]["verl"]["version"].startswith(line + ".")
    assert data["facts"]["verl"]["value"] == line
    assert "verl/version/version" in data["facts"]["verl"]["source"]


def test_a_checkout_newer_than_every_row_takes_the_newest_with_a_warning(tmp_path: Path) -> None:
    co = checkout(tmp_path / "verl", "0.10.0.dev")
    data = json.loads(run_cli("plan", *H100, "--with-editable", str(co), "--json").out)["data"]
    assert data["row"]["verl"]["version"].startswith("0.9.")
    assert any("newer than every row's verl" in w for w in data["warnings"])


def _snapshot(dists: tuple[tuple[str, str, str], ...]) -> Snapshot:
    return Snapshot(
        python="3.12.3", executable="/env/bin/python", prefix="/env", platform="linux-x86_64",
        hostname="node", markers={},
        dists=tuple(Dist(name=n, version=v, location=loc) for n, v, loc in dists),
    )  # fmt: skip


def test_a_removed_package_of_yours_fails_verify_and_is_named_yours() -> None:
    expected = Expected(
        source="manifest", pins={"tabulate": "0.10.0", "torch": "2.11.0"}, complete=True,
        user={"tabulate": "--with"},
    )  # fmt: skip
    findings, _ = compare(_snapshot((("torch", "2.11.0", "/env/site"),)), expected)
    assert [(f.kind, f.name, f.note) for f in findings] == [("missing", "tabulate", "your package (--with)")]


def test_an_editable_checkouts_own_metadata_is_no_duplicate() -> None:
    snap = _snapshot((("verl", "0.9.1", "/env/site"), ("verl", "0.9.1", "/src/verl")))
    plain = Expected(source="row", pins={"torch": "2.11.0"}, complete=False)
    assert [f.kind for f in compare(snap, plain)[0] if f.name == "verl"] == ["duplicate"]
    mine = Expected(source="row", pins={}, complete=False, editables=("/src/verl",))
    assert compare(snap, mine)[0] == []


def test_a_checkout_that_left_the_row_line_warns(tmp_path: Path) -> None:
    co = checkout(tmp_path / "verl", "0.9.1")
    record = {"with": [{"name": "verl", "path": str(co), "editable": True, "row_verl": "0.9.1"}]}
    assert user_warnings(record) == []
    (co / "verl" / "version" / "version").write_text("0.10.0\n")
    (warning,) = user_warnings(record)
    assert "is now 0.10.0, outside the row's verl line 0.9.1" in warning


@pytest.mark.subprocess  # render reads this host's glibc
def test_render_docker_puts_your_packages_in_a_layer_after_the_rows(tmp_path: Path) -> None:
    result = run_cli("render", "docker", "--no-gpu", "--with", "tabulate", "--out", str(tmp_path / "r"))
    assert result.code == 0, result.err
    text = (tmp_path / "r" / "Dockerfile").read_text()
    runs = [ln for ln in text.splitlines() if ln.startswith("RUN uv pip install")]
    assert "'verl[verl-core]==0.9.1'" in runs[-2]
    assert runs[-1].endswith(" tabulate")
    assert "numpy==2.2.6" in runs[-1]


@pytest.mark.subprocess  # render reads this host's glibc
def test_a_local_checkout_is_refused_for_an_image(tmp_path: Path) -> None:
    co = checkout(tmp_path / "verl", "0.9.1")
    result = run_cli("render", "docker", "--no-gpu", "--with-editable", str(co), "--out", str(tmp_path / "r"))
    assert result.code == 2
    assert (
        "which docker's build does not see: commit it and give --with 'NAME @ git+URL@COMMIT'" in result.err
    )


def test_the_uv_project_names_git_and_editable_sources(tmp_path: Path) -> None:
    from verl_setup.plan.user_packages import UserPackages  # noqa: PLC0415
    from verl_setup.plan.user_recipe import with_user_packages  # noqa: PLC0415
    from verl_setup.render.uv_project import project  # noqa: PLC0415

    sha = "c88ac084e5c27a72dc48a457de6df29171c70f61"
    mine = checkout(tmp_path / "reward", "1.0", name="our-reward")
    user = UserPackages(
        requirements=(
            parse_with(f"verl @ git+file:///srv/verl@{sha}", "--with"),
            parse_with("tabulate", "--with"),
            parse_with(str(mine), "--with"),
        )
    )
    plan = plan_for_cpu()
    got = project(plan, with_user_packages(build_recipe(plan), user))
    assert "verl[verl-core]" in got.dependencies
    assert not any(d.startswith(("-e", "verl[verl-core]==")) for d in got.dependencies)
    sources = {s.name: dict(s.fields) for s in got.sources}
    assert sources["verl"] == {"git": "file:///srv/verl", "rev": sha}
    assert sources["our-reward"] == {"path": str(mine), "editable": True}


def plan_for_cpu() -> Plan:
    from tests.conftest import host  # noqa: PLC0415
    from verl_setup.matrix.load import load_matrix  # noqa: PLC0415
    from verl_setup.plan.request import Request  # noqa: PLC0415
    from verl_setup.plan.select import plan_row  # noqa: PLC0415
    from verl_setup.plan.target import build_target  # noqa: PLC0415

    matrix, machine = load_matrix(None), host()
    target = build_target(
        Request(no_gpu=True), env={}, rules=matrix.cuda, detect=lambda: machine, load_host=lambda _p: machine
    )
    return plan_row(target, matrix, "cpu")
