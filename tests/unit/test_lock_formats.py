"""Lock format 4 (options in the body, plain install commands in the header), format 3 still read,
and the PEP 751 pylock.toml with its sealed [tool.verl-setup] table."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from tests.render_scenarios import SCENARIOS, plan_for
from tests.unit.test_lock import BODY, FIELDS
from verl_setup.environment.lock import OLDEST_PIP, body_options, parse, parse_pylock, render, then_commands
from verl_setup.environment.pylock import check_name, is_pylock_name, pylock_name, render_pylock
from verl_setup.errors import BadInputError, InstallError
from verl_setup.plan.recipe import build_recipe

TORCH_INDEX = "https://torch.example/whl/cu129"
PYLOCK_BODY = """\
lock-version = "1.0"
created-by = "uv"
requires-python = ">=3.11.7"

[[packages]]
name = "Six"
version = "1.17.0"
wheels = [{ url = "https://files.example/six-1.17.0-py2.py3-none-any.whl", hashes = { sha256 = "47" } }]

[[packages]]
name = "flash-attn"
version = "2.8.3+cu12torch2.8cxx11abitrue"
marker = "sys_platform == 'linux'"
wheels = [{ url = "https://files.example/flash_attn-2.8.3.whl", hashes = { sha256 = "48" } }]
"""


def test_the_body_names_the_rows_index_and_wheels_only_in_the_order_pip_reads_right() -> None:
    # pip clears earlier --no-binary names when it reads `--only-binary :all:`: the exceptions go after.
    assert body_options(TORCH_INDEX, ("antlr4-python3-runtime",)) == (
        f"--extra-index-url {TORCH_INDEX}\n--only-binary :all:\n--no-binary antlr4-python3-runtime\n"
    )
    assert (
        body_options(None, ()) == "--only-binary :all:\n"
    )  # the user's default index (a mirror) stays theirs


def test_the_header_names_the_plain_commands_and_the_index_strategy_uv_needs_for_an_extra_index() -> None:
    plain = render(FIELDS, body_options(None, ()) + BODY)
    assert "# install-uv: uv pip sync <this file>\n" in plain
    assert f"# install-pip: pip install --no-deps -r <this file> (pip {OLDEST_PIP} or newer)\n" in plain
    indexed = render({**FIELDS, "index-url": TORCH_INDEX}, body_options(TORCH_INDEX, ()) + BODY)
    assert "# install-uv: uv pip sync --index-strategy unsafe-best-match <this file>\n" in indexed
    lock = parse(indexed, Path("verl.lock"))
    assert lock.index_url == TORCH_INDEX
    assert [p.name for p in lock.pins] == ["nvidia-cudnn-cu13", "six", "verl"]  # option lines are no pins


def test_an_edited_install_line_is_refused_like_any_header_line() -> None:
    text = render(FIELDS, BODY).replace("pip install --no-deps", "pip install", 1)
    with pytest.raises(InstallError, match="no longer matches sha256"):
        parse(text, Path("verl.lock"))


def format_3(fields: dict[str, str], body: str) -> str:
    """A lock as verl-setup wrote it before format 4 (no install lines, no options in the body)."""
    header = "# verl-setup lock, format 3: install with `verl-setup install --lock FILE`; do not edit\n"
    header += "".join(f"# {k}: {v}\n" for k, v in fields.items())
    return f"{header}# sha256: {hashlib.sha256((header + body).encode()).hexdigest()}\n{body}"


def test_a_format_3_lock_still_reads_and_stays_sealed() -> None:
    text = format_3(FIELDS, BODY)
    lock = parse(text, Path("old.lock"))
    assert lock.row_id == "cpu"
    assert len(lock.pins) == 3
    assert "install-uv" not in lock.fields
    with pytest.raises(InstallError, match="no longer matches sha256"):
        parse(text.replace("# row: cpu", "# row: tiny", 1), Path("old.lock"))
    # A format 3 lock never had install lines: one is an edit, not a field.
    with_line = text.replace("# row: cpu\n", "# install-uv: uv pip sync x\n# row: cpu\n", 1)
    with pytest.raises(BadInputError, match="lacks"):
        parse(with_line, Path("old.lock"))


def test_a_build_and_the_no_deps_packages_are_named_as_the_commands_after_the_locked_wheels() -> None:
    (scenario,) = [s for s in SCENARIOS if s.name == "h200-drv580-py312-vllm"]
    built = build_recipe(plan_for(scenario), flash_attn="build", nvcc_version="13.0", cores=8, memory_gib=64)
    then = then_commands(built)
    assert then is not None
    first, second = then.split("; ")
    assert first.startswith("uv pip install torch==")
    assert "setuptools" in first
    assert "flash-attn==2.8.3" in second
    assert "--no-build-isolation" in second
    assert "MAX_JOBS" not in then  # measured where it builds: the lock is the same bytes everywhere
    other_machine = build_recipe(
        plan_for(scenario), flash_attn="build", nvcc_version="13.0", cores=2, memory_gib=8
    )
    assert then_commands(other_machine) == then
    assert then_commands(build_recipe(plan_for(scenario))) is None  # a wheel is in the lock itself


@pytest.mark.parametrize(
    ("name", "ok"),
    [("pylock.toml", True), ("pylock.cpu.toml", True), ("pylock.verl0.9.toml", False), ("cpu.toml", False)],
)
def test_pylock_file_names_follow_pep_751(name: str, ok: bool) -> None:
    assert is_pylock_name(name) is ok


def test_a_row_id_with_dots_gets_a_pep_751_name_and_a_wrong_name_is_bad_input() -> None:
    assert pylock_name("verl0.9-vllm0.24.0") == "pylock.verl0-9-vllm0-24-0.toml"
    assert is_pylock_name(pylock_name("verl0.9-vllm0.24.0"))
    with pytest.raises(BadInputError, match=r"try --out pylock\.verl0-9-vllm0-24-0\.toml"):
        check_name(Path("locks/verl0.9.toml"), "verl0.9-vllm0.24.0")


def test_a_pylock_reads_back_with_its_fields_and_pins_and_an_extension_wheels_public_version() -> None:
    fields = {
        **FIELDS,
        "flash-attn": "wheel 2.8.3",
        "torch-extensions": "transformer-engine-torch=wheel 2.16.1 as transformer-engine",
        "then": 'uv pip install --no-deps "mbridge @ git+x"',
    }
    body = PYLOCK_BODY + '\n[[packages]]\nname = "transformer-engine"\nversion = "2.16.1+cu13torch2.11"\n'
    text = render_pylock(fields, body)
    assert '\n[tool.verl-setup]\nformat = 1\nrow = "cpu"\n' in text
    lock = parse_pylock(text, Path("pylock.cpu.toml"))
    assert lock.kind == "pylock"
    assert lock.row_id == "cpu"
    assert lock.fields["then"] == fields["then"]
    assert [(p.name, p.version, p.marker) for p in lock.pins] == [
        ("six", "1.17.0", None),
        ("flash-attn", "2.8.3", "sys_platform == 'linux'"),
        ("transformer-engine", "2.16.1", None),
    ]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ('row = "cpu"', 'row = "tiny"'),
        ('hashes = { sha256 = "47" }', 'hashes = { sha256 = "46" }'),
        ('requires-python = ">=3.12,<3.13"', 'requires-python = ">=3.10"'),
    ],
    ids=["table", "hash", "requires-python"],
)
def test_an_edited_pylock_is_refused(old: str, new: str) -> None:
    text = render_pylock(FIELDS, PYLOCK_BODY)
    assert old in text
    with pytest.raises(InstallError, match="was changed after `verl-setup lock` wrote it"):
        parse_pylock(text.replace(old, new, 1), Path("pylock.toml"))


def test_a_pylock_from_another_tool_is_bad_input_in_one_line() -> None:
    with pytest.raises(BadInputError, match=r"not a pylock that verl-setup wrote") as caught:
        parse_pylock(PYLOCK_BODY, Path("pylock.toml"))
    assert "\n" not in str(caught.value)
    assert caught.value.exit_code == 2


def test_the_pylocks_python_rule_is_the_locks_minor_as_install_and_the_requirements_lock_take_it() -> None:
    # issue 32: uv wrote ">=3.11.7"-style bounds (">=3.12.3"), refusing the 3.12.1 install falls
    # back to and admitting 3.13, which the row does not support.
    from packaging.specifiers import SpecifierSet  # noqa: PLC0415

    text = render_pylock(FIELDS, PYLOCK_BODY)  # FIELDS: Python 3.12.3
    (line,) = [x for x in text.splitlines() if x.startswith("requires-python = ")]
    bound = SpecifierSet(line.split('"')[1])
    assert [v for v in ("3.11.9", "3.12.0", "3.12.1", "3.12.3", "3.12.9", "3.13.0") if v in bound] == [
        "3.12.0", "3.12.1", "3.12.3", "3.12.9",
    ]  # fmt: skip
    assert parse_pylock(text, Path("pylock.toml")).row_id == "cpu"  # still sealed and read


def test_both_lock_formats_say_at_the_top_which_python_to_create_the_env_with_and_how_to_install() -> None:
    requirements = render(FIELDS, BODY).splitlines()
    assert requirements[1] == (
        "# create-env: uv venv --python 3.12.3 ENV (any 3.12.x works; or: python3.12 -m venv ENV)"
    )
    assert requirements[2] == "# install-uv: uv pip sync <this file>"
    assert parse(render(FIELDS, BODY), Path("verl.lock")).fields["create-env"].startswith("uv venv")
    pylock = render_pylock({**FIELDS, "then": "uv pip install --no-deps x"}, PYLOCK_BODY).splitlines()
    assert pylock[0].startswith(
        "# verl-setup lock (PEP 751) of row cpu for Python 3.12 on x86_64-manylinux_2_28"
    )
    assert (
        pylock[1]
        == "# create-env: uv venv --python 3.12.3 ENV (any 3.12.x works; or: python3.12 -m venv ENV)"
    )
    assert pylock[2] == "# install-uv: uv pip sync --python ENV/bin/python THIS_FILE"
    assert pylock[3] == "# then: uv pip install --no-deps x"
