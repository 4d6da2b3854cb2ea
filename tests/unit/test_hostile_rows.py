"""A rows file is data a team shares, never code: every string field of matrices/verl.yaml and
cuda.yaml gets `$(touch X)`, a backtick, a line break and quotes. The fields that name a package,
image, variable or version are refused by the loader (file, line, key); with the rest hostile,
every target renders, and neither the venv script (--dry-run) nor any Dockerfile RUN line runs X."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import pytest

from tests.conftest import host, run_cli
from verl_setup.errors import BadInputError
from verl_setup.matrix.load import check, load_matrix
from verl_setup.matrix.schema import CudaFile, RowsFile
from verl_setup.plan.request import Request
from verl_setup.plan.select import select
from verl_setup.plan.steps import Choice
from verl_setup.plan.target import build_target
from verl_setup.render.templates import TARGETS, RenderOptions, render
from verl_setup.util.databuild import LinedDict
from verl_setup.util.paths import data_dir
from verl_setup.util.yamlread import read_yaml

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10 reads TOML with tomli (a dependency there)
    import tomli as tomllib

# Fields that refer to another entry by its name (a source, an index) or match GPU names: a hostile
# value there is refused as unknown or matches nothing, before any rendering.
REFERENCES = re.compile(r"(^|\.)source$|\.torch\.index$|^forward_compat\.gpus\[")


def payload(mark: Path) -> str:
    return f"$(touch {mark})`touch {mark}`\n\"'"


@dataclasses.dataclass
class Leaf:
    """One string in the data: where it sits, its line, and whether the schema gives it a shape."""

    container: Any
    key: Any
    where: str
    line: int
    shaped: bool
    is_key: bool = False


def _leaves(hint: Any, data: Any, where: str, line: int) -> Iterator[Leaf]:  # noqa: PLR0912
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Annotated:
        yield from _leaves(args[0], data, where, line)
        return
    if origin in (typing.Union, typing.types.UnionType):  # type: ignore[attr-defined]
        if data is not None:
            yield from _leaves(next(a for a in args if a is not type(None)), data, where, line)
        return
    if origin is tuple:
        for i, item in enumerate(data):
            inner = args[0]
            if isinstance(item, str) and origin is tuple:
                yield Leaf(data, i, f"{where}[{i}]", line, typing.get_origin(inner) is typing.Annotated)
            else:
                yield from _leaves(inner, item, f"{where}[{i}]", getattr(item, "line", line))
        return
    if origin is dict:
        lines = data.key_lines if isinstance(data, LinedDict) else {}
        key_shaped = typing.get_origin(args[0]) is typing.Annotated
        for k in list(data):
            yield Leaf(data, k, f"{where}.{k}", lines.get(k, line), key_shaped, is_key=True)
            value = data[k]
            if isinstance(value, str):
                yield Leaf(
                    data,
                    k,
                    f"{where}.{k}",
                    lines.get(k, line),
                    typing.get_origin(args[1]) is typing.Annotated,
                )
            else:
                yield from _leaves(args[1], value, f"{where}.{k}", lines.get(k, line))
        return
    if dataclasses.is_dataclass(hint):
        hints = typing.get_type_hints(hint, include_extras=True)
        lines = data.key_lines if isinstance(data, LinedDict) else {}
        for name in list(data):
            sub, value = hints[name], data[name]
            sub_where = f"{where}.{name}" if where else name
            if isinstance(value, str):
                literal = typing.get_origin(sub) is Literal
                shaped = typing.get_origin(sub) is typing.Annotated or (
                    typing.get_origin(sub) in (typing.Union, typing.types.UnionType)  # type: ignore[attr-defined]
                    and any(typing.get_origin(a) is typing.Annotated for a in typing.get_args(sub))
                )
                if not literal:
                    yield Leaf(data, name, sub_where, lines.get(name, line), shaped)
            elif value is not None and not isinstance(value, (bool, int, float)):
                yield from _leaves(sub, value, sub_where, getattr(value, "line", lines.get(name, line)))


def _keep_rows(data: Any, ids: set[str]) -> None:
    data["rows"] = [r for r in data["rows"] if r["id"] in ids]


def _inject(leaf: Leaf, text: str) -> None:
    if leaf.is_key:
        leaf.container[leaf.key + text] = leaf.container.pop(leaf.key)
    else:
        leaf.container[leaf.key] += text


ROWS = {"cpu", "verl0.9-vllm0.24.0-megatron"}


def _files() -> tuple[Any, Any]:
    rows, _ = read_yaml(data_dir("matrices") / "verl.yaml")
    cuda, _ = read_yaml(data_dir("matrices") / "cuda.yaml")
    _keep_rows(rows, ROWS)
    return rows, cuda


def _write(tmp_path: Path, rows: Any, cuda: Any) -> Path:
    # JSON is YAML: one key per line keeps each line number meaningful for the validate half.
    (tmp_path / "cuda.yaml").write_text(json.dumps(cuda, indent=1))
    path = tmp_path / "verl.yaml"
    path.write_text(json.dumps(rows, indent=1))
    return path


def test_matrix_validate_refuses_every_hostile_name_with_file_line_and_key(tmp_path: Path) -> None:
    mark = tmp_path / "X"
    rows, cuda = _files()
    path = _write(tmp_path, rows, cuda)  # once plain, so that lines are those of the written file
    rows, _ = read_yaml(path)
    cuda, _ = read_yaml(tmp_path / "cuda.yaml")
    shaped = [
        leaf
        for hint, data in ((RowsFile, rows), (CudaFile, cuda))
        for leaf in _leaves(hint, data, "", 1)
        if leaf.shaped
    ]
    assert len(shaped) > 150  # names, versions, images, variables, URLs of two rows and the facts
    for leaf in sorted(shaped, key=lambda leaf: leaf.is_key):  # values before their keys change
        _inject(leaf, payload(mark))
    path = _write(tmp_path, rows, cuda)
    problems, matrix = check(path)
    assert matrix is None
    assert all("\n" not in p for p in problems)
    refused = {p.split(": ")[0] + ": " + p.split(": ")[1] for p in problems if "no shell or control" in p}
    for leaf in shaped:
        file = "cuda.yaml" if leaf.container is not None and _in(cuda, leaf.container) else "verl.yaml"
        assert any(p.startswith(f"{tmp_path / file}:{leaf.line}:") for p in refused), (leaf.where, leaf.line)
    validate = run_cli("matrix", "validate", str(path))
    assert validate.code == 2
    assert validate.out.count("no shell or control characters") == sum("no shell" in p for p in problems) > 0
    assert not mark.exists()


def _in(data: Any, target: Any) -> bool:
    stack = [data]
    while stack:
        item = stack.pop()
        if item is target:
            return True
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _plan(path: Path, row: str) -> Any:
    matrix = load_matrix(path)
    if row == "cpu":
        machine, request = host(), Request(no_gpu=True)
    else:
        machine = host(driver="535.129.03", gpus=(("NVIDIA H100 80GB HBM3", "9.0"),))
        request = Request(driver="535.129.03", gpus=("H100",), policy="forward", backend="megatron")
    target = build_target(
        request, env={}, rules=matrix.cuda, detect=lambda: machine, load_host=lambda _p: machine
    )
    plan = select(target, matrix)
    assert plan.row.id == row
    return plan


@pytest.mark.subprocess
def test_hostile_rows_file_renders_every_target_and_runs_nothing(tmp_path: Path) -> None:
    mark = tmp_path / "X"
    rows, cuda = _files()
    free = [
        leaf
        for hint, data in ((RowsFile, rows), (CudaFile, cuda))
        for leaf in _leaves(hint, data, "", 1)
        if not leaf.shaped and not leaf.is_key and not REFERENCES.search(leaf.where)
    ]
    assert len(free) > 60
    for leaf in free:
        _inject(leaf, payload(mark))
    path = _write(tmp_path, rows, cuda)
    assert check(path)[0] == []
    extensions: dict[str, Choice] = {
        "flash-attn": "build",
        "transformer-engine-torch": "build",
        "apex": "without",
    }
    no_choice: dict[str, Choice] = {}
    for row, choices in (("cpu", no_choice), ("verl0.9-vllm0.24.0-megatron", extensions)):
        options = RenderOptions(
            targets=tuple(TARGETS), extensions=choices, job="python3 -m verl.trainer.main_ppo"
        )
        files = {f.name: f.content for f in render(_plan(path, row), options)}
        assert str(mark) in files["setup-venv.sh"] or row == "cpu"  # the hostile text is there, as text
        # The uv project is still TOML of the same shape, the hostile text in comments only.
        project = tomllib.loads(files["pyproject.toml"])
        assert sorted(project) == ["project", "tool"]
        assert project["tool"]["verl-setup"]["row"] == row
        assert str(mark) not in json.dumps(project)
        out = tmp_path / row
        out.mkdir()
        for name, content in files.items():
            (out / name).write_text(content)
        dry = subprocess.run(
            ["bash", str(out / "setup-venv.sh"), "--dry-run"],
            cwd=out,
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, "PYENV_ROOT": str(tmp_path / "no-pyenv")},
        )
        assert dry.returncode == 0, dry.stderr
        (out / "etc").mkdir()
        dockerfile = files["Dockerfile"].replace("\\\n", " ")
        for line in (t.removeprefix("RUN ") for t in dockerfile.splitlines() if t.startswith("RUN ")):
            # The RUN line's text as Docker hands it to its SHELL (bash -o pipefail -c), with no
            # program on PATH: uv, apt-get and python are not run, but a touch that escaped its
            # quotes is (and writes X).
            handler = 'command_not_found_handle() { [ "$1" != touch ] || /usr/bin/touch "${@:2}"; }\n'
            text = re.sub(r"--mount=\S+ ", "", line).replace("/etc/verl-setup", str(out / "etc"))
            subprocess.run(
                ["/bin/bash", "-o", "pipefail", "-c", handler + text],
                cwd=out,
                capture_output=True,
                check=False,
                env={"PATH": str(tmp_path / "no-programs")},
            )
        assert not mark.exists(), row
        sh = subprocess.run(["/bin/bash", "-c", f"source {out}/env.sh"], capture_output=True, check=False)
        assert sh.returncode == 0
        assert not mark.exists()


def test_an_unquoted_value_in_a_template_is_refused() -> None:
    from verl_setup.render.templates import jinja_env  # noqa: PLC0415

    template = jinja_env().from_string("say {{ text }}\n")
    assert template.render(text="plain-word_1.0") == "say plain-word_1.0\n"
    with pytest.raises(BadInputError, match="unquoted"):
        template.render(text="$(touch X)")
    assert (
        jinja_env().from_string("say {{ text | sh }}\n").render(text="$(touch X)") == 'say "\\$(touch X)"\n'
    )
