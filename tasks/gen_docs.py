"""Write the docs pages that come from the code: the CLI reference (from the parser), environment
variables, exit codes, JSON schemas, team config keys, and the matrix page with its selector grid.

    python tasks/gen_docs.py            # write them
    python tasks/gen_docs.py --check    # exit 1 naming every page that differs (tests do the same)

A build task outside the package, as pdm's tasks/render_reference_docs.py is: the pages are
committed so the site builds from a checkout, and tests/unit/test_docs_generated.py fails when one
is stale. The selector grid is `plan`'s own answer for every input of GRID, computed here with the
real selection code; the page's script only looks answers up.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import inspect
import io
import itertools
import json
import os
import re
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "installer"))

from verl_setup import errors  # noqa: E402
from verl_setup.cli import NESTED, build_parser, parse  # noqa: E402
from verl_setup.plan import team_config  # noqa: E402

DOCS = ROOT / "docs"
PACKAGE = ROOT / "installer" / "verl_setup"
WIDTH = "100"  # argparse's usage lines wrap at $COLUMNS - 2: fixed, so the pages are the same anywhere

# The variables that stand for no flag, and what they do (a flag's variable is found from the code:
# the flag --x-y is read as VERL_SETUP_X_Y where the package's source names that variable).
# Which commands read each: "*" every command; else the commands.
OTHER_VARIABLES: dict[str, tuple[str, str]] = {
    "VERL_SETUP_DEBUG": ("*", "`1`: an unexpected error (exit 1) prints its traceback"),
    "VERL_SETUP_CACHE_DIR": (
        "*",
        "where the parsed matrix and what each Python said about itself are cached"
        " (else `$XDG_CACHE_HOME/verl-setup`, `~/.cache/verl-setup`)",
    ),
    "UV_CUDA_DRIVER_VERSION": ("--driver", "uv's own override of the detected NVIDIA driver, read here too"),
    "CONDA_OVERRIDE_CUDA": ("--driver", "conda's override of the CUDA version the driver supports"),
    "VERL_SETUP_PROVE_EXTRA_INDEXES": (
        "matrix prove,matrix check",
        "`1`: also prove or check the rows whose torch is on an extra index (not tested here)",
    ),
    "VERL_SETUP_PROVE_GIT": ("matrix prove", "`1`: keep a row's git sources in its proof"),
    "VERL_SETUP_PROVE_WITH": (
        "matrix prove",
        "packages built against torch to include in a proof (comma-separated; from the wheel sources)",
    ),
    "VERL_SETUP_PROVE_WHEEL_SOURCES": (
        "matrix prove",
        "the wheel sources a proof reads (it reads no other `VERL_SETUP_*`)",
    ),
    "VERL_SETUP_PROVE_TRAINS": ("matrix prove", "`0`: stop a proof before `trains` (verl-setup smoke)"),
    "VERL_SETUP_PROVE_GPUS": (
        "matrix prove",
        "GPUs a GPU host gives the `trains` step (set by .ci/gpu-smoke; 0 or unset: the CPU only)",
    ),
    "VERL_SETUP_PROVE_GPU_NAME": ("matrix prove", "the GPU host's name the `trains` step records"),
    "VERL_SETUP_ALLOW_HTTP": (
        "*",
        "`1`: a wheel source or download may use plain HTTP beyond this machine (else refused)",
    ),
}
# A flag whose variable is not its name in capitals.
FLAG_VARIABLE = {"--wheel-source": "VERL_SETUP_WHEEL_SOURCES"}
# Not settings: a marker a child prints, and the prefix a proof filters on.
# The import probe's shard is what it tells its own child processes.
NOT_SETTINGS = {"VERL_SETUP_RESULT", "VERL_SETUP_PROVE", "VERL_SETUP_PROBE_SHARD"}

# The selector's inputs: every combination is planned. Labels are what the page shows.
GRID: dict[str, list[tuple[str, str]]] = {
    "driver": [
        ("none", "no NVIDIA GPU (CPU only)"),
        ("535.129.03", "535 (CUDA 12.2)"),
        ("550.54.15", "550 (CUDA 12.4)"),
        ("570.86.10", "570 (CUDA 12.8)"),
        ("580.65.06", "580 (CUDA 13.0)"),
    ],
    "sm": [
        ("7.0", "7.0 (V100)"),
        ("8.0", "8.0 (A100)"),
        ("9.0", "9.0 (H100, H200)"),
        ("10.0", "10.0 (B200)"),
    ],
    "arch": [("x86_64", "x86_64"), ("aarch64", "aarch64 (Grace)")],
    "glibc": [
        ("2.28", "2.28 (RHEL 8)"),
        ("2.31", "2.31 (Ubuntu 20.04)"),
        ("2.35", "2.35 (Ubuntu 22.04)"),
        ("2.39", "2.39 (Ubuntu 24.04)"),
    ],
    "python": [("3.10", "3.10"), ("3.11", "3.11"), ("3.12", "3.12")],
    "engine": [("any", "any"), ("vllm", "vLLM"), ("sglang", "SGLang"), ("none", "none")],
    "backend": [("fsdp", "FSDP"), ("megatron", "Megatron")],
}


CPU_HOST = "docs/assets/cpu-host.json"  # relative to the checkout, as the page prints it


def plan_argv(inputs: dict[str, str]) -> list[str]:
    """The `plan` flags for one input of the grid (a CPU host takes no --sm)."""
    argv = ["plan", "--no-config"]
    if inputs["driver"] == "none":
        # A plan for a CPU machine would otherwise detect this one (its Pythons pick the patch
        # version): the page's CPU machine is a host file with no Python found, the same anywhere.
        argv += ["--no-gpu", "--host", CPU_HOST]
    else:
        argv += ["--driver", inputs["driver"], "--sm", inputs["sm"], "--gpu-count", "8"]
    argv += ["--arch", inputs["arch"], "--glibc", inputs["glibc"], "--python", inputs["python"]]
    if inputs["engine"] != "any":
        argv += ["--engine", inputs["engine"]]
    return [*argv, "--backend", inputs["backend"]]


def grid_inputs() -> Iterator[dict[str, str]]:
    """Every input of the grid; a CPU host once per other value (its sm is not asked)."""
    names = list(GRID)
    for values in itertools.product(*(v for v, _ in (zip(*GRID[n], strict=True) for n in names))):
        inputs = dict(zip(names, values, strict=True))
        if inputs["driver"] == "none" and inputs["sm"] != GRID["sm"][0][0]:
            continue
        yield inputs


def grid_key(inputs: dict[str, str]) -> str:
    sm = "-" if inputs["driver"] == "none" else inputs["sm"]
    return "|".join(sm if n == "sm" else inputs[n] for n in GRID)


# --- the parser ---------------------------------------------------------------------------------


def commands() -> list[tuple[str, argparse.ArgumentParser]]:
    """(`matrix check`, its parser) for every command that runs something, in --help order."""
    os.environ["COLUMNS"] = WIDTH
    top = build_parser()
    found = []
    for name, sub in _children(top):
        nested = _children(sub)
        found += (
            [(f"{name} {child}", p) for child, p in nested] if name in NESTED and nested else [(name, sub)]
        )
    return found


def _children(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return [(n, p) for s in subs for n, p in s.choices.items()]


def flag_variables() -> dict[str, str]:
    """flag -> the VERL_SETUP_* variable that stands for it, where the package's source reads it."""
    source = "\n".join(p.read_text(encoding="utf-8") for p in PACKAGE.rglob("*.py"))
    found = {}
    for _, parser in commands():
        for action in parser._actions:
            for flag in action.option_strings:
                name = FLAG_VARIABLE.get(flag, "VERL_SETUP_" + flag[2:].upper().replace("-", "_"))
                if flag.startswith("--") and f'"{name}"' in source:
                    found[flag] = name
    return found


def variables_of(command: str, parser: argparse.ArgumentParser, by_flag: dict[str, str]) -> list[str]:
    flags = {f for a in parser._actions for f in a.option_strings}
    names = [by_flag[f] for f in sorted(flags) if f in by_flag]
    for name, (who, _) in OTHER_VARIABLES.items():
        if who == "*" or command in who.split(",") or (who.startswith("--") and who in flags):
            names.append(name)
    return names


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _value(action: argparse.Action) -> str:
    if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
        return " \\| ".join(f"`{c}`" for c in action.choices)
    if action.nargs == 0:
        return ""
    return f"`{action.metavar or action.dest.upper()}`"


def cli_page() -> str:
    by_flag = flag_variables()
    out = [
        "# Commands and flags",
        "",
        "Generated from the parser by `tasks/gen_docs.py`; do not edit. Every command also takes",
        "`-h/--help`. A flag beats its environment variable, which beats the team config, a host file",
        "and detection.",
        "",
    ]
    for name, parser in commands():
        out += [f"## {name}", ""]
        if parser.description:
            out += [parser.description, ""]
        out += ["```", parser.format_usage().strip(), "```", ""]
        for group in parser._action_groups:
            actions = [a for a in group._group_actions if not isinstance(a, argparse._HelpAction)]
            if not actions:
                continue
            title = group.title or "options"
            out += [f"**{_cell(title)}**", "", "| flag | value | what |", "| --- | --- | --- |"]
            for a in actions:
                flag = ", ".join(f"`{s}`" for s in a.option_strings) or f"`{a.metavar or a.dest}`"
                what = a.help or ""
                variable = next((by_flag[s] for s in a.option_strings if s in by_flag), None)
                if variable:
                    what += f" [env: `{variable}`]"
                out.append(f"| {flag} | {_value(a)} | {_cell(what)} |")
            out.append("")
        names = variables_of(name, parser, by_flag)
        out += ["Environment: " + ", ".join(f"`{n}`" for n in names) + ".", ""]
    return "\n".join(out).rstrip() + "\n"


def environment_page() -> str:
    by_flag = flag_variables()
    readers: dict[str, list[str]] = {}
    for name, parser in commands():
        for variable in variables_of(name, parser, by_flag):
            readers.setdefault(variable, []).append(name)
    flag_of = {v: f for f, v in by_flag.items()}
    out = [
        "# Environment variables",
        "",
        "Generated by `tasks/gen_docs.py` from the parser and the package's source; do not edit.",
        "A variable that stands for a flag sits below the flag and above the team config, a host",
        "file and detection. uv reads its own `UV_*` settings, except those that would re-resolve a",
        "row (`UV_TORCH_BACKEND`, `UV_EXTRA_INDEX_URL`, ...), which are dropped with a warning.",
        "",
        "| variable | what | commands |",
        "| --- | --- | --- |",
    ]
    for variable in sorted(readers):
        what = f"as `{flag_of[variable]}`" if variable in flag_of else OTHER_VARIABLES[variable][1]
        commands_text = (
            "every command"
            if len(readers[variable]) == len(commands())
            else ", ".join(f"`{c}`" for c in readers[variable])
        )
        out.append(f"| `{variable}` | {_cell(what)} | {commands_text} |")
    return "\n".join(out) + "\n"


def documented_variables() -> set[str]:
    return set(flag_variables().values()) | set(OTHER_VARIABLES)


def source_variables() -> set[str]:
    """Every VERL_SETUP_* name the package's Python source spells out in quotes."""
    names: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        names |= set(re.findall(r"[\"'](VERL_SETUP_[A-Z_]+)", path.read_text(encoding="utf-8")))
    return names - NOT_SETTINGS


def exit_codes_page() -> str:
    rows = [("0", "ok", "the command did what it was asked")]
    for _, cls in inspect.getmembers(errors, inspect.isclass):
        code = getattr(cls, "exit_code", None)
        if issubclass(cls, errors.VerlSetupError) and code is not None:
            rows.append((str(code), cls.__name__, inspect.getdoc(cls) or ""))
    rows.sort(key=lambda r: int(r[0]))
    rows.append(("128 + N", "Stopped", inspect.getdoc(errors.Stopped) or ""))
    out = [
        "# Exit codes",
        "",
        "Generated from `verl_setup/errors.py` by `tasks/gen_docs.py`; do not edit. A usage error",
        "(an unknown flag, a bad value) is exit 2 as well. Ctrl-C is signal 2: exit 130.",
        "",
        "| code | class | meaning |",
        "| --- | --- | --- |",
    ]
    out += [f"| {c} | `{n}` | {_cell(d)} |" for c, n, d in rows]
    return "\n".join(out) + "\n"


def schemas_page() -> str:
    folder = PACKAGE / "schemas"
    versions = (folder / "VERSIONS").read_text(encoding="utf-8").strip()
    out = [
        "# JSON output and its schemas",
        "",
        "Generated from `verl_setup/schemas/` by `tasks/gen_docs.py`; do not edit. Every `--json`",
        "prints one envelope on stdout, on failure too; its `data` follows the command's schema.",
        "The schemas ship in the package. `VERSIONS` records their digest for each envelope `schema`",
        "number:",
        "",
        "```",
        versions,
        "```",
        "",
    ]
    for path in sorted(folder.glob("*.json"), key=lambda p: (p.name != "envelope.json", p.name)):
        schema = json.loads(path.read_text(encoding="utf-8"))
        title = path.stem
        out += [f"## {title}", ""]
        if schema.get("description"):
            out += [_cell(str(schema["description"])), ""]
        props = schema.get("properties", {})
        if props:
            required = set(schema.get("required", []))
            out += ["| key | type | required |", "| --- | --- | --- |"]
            for key, spec in props.items():
                kind = spec.get("type", "") if isinstance(spec, dict) else ""
                kind = " \\| ".join(kind) if isinstance(kind, list) else kind
                out.append(f"| `{key}` | {kind or 'see schema'} | {'yes' if key in required else ''} |")
            out.append("")
        out += [
            f'??? note "{path.name}"',
            "",
            "    ```json",
            *("    " + line for line in json.dumps(schema, indent=2).splitlines()),
            "    ```",
            "",
        ]
    return "\n".join(out).rstrip() + "\n"


def team_config_page() -> str:
    os.environ["COLUMNS"] = WIDTH
    plan = dict(commands())["install"]
    help_of = {s: a.help or "" for a in plan._actions for s in a.option_strings}
    out = [
        "# Config files and their keys",
        "",
        "Generated from `plan/team_config.py` and the parser by `tasks/gen_docs.py`; do not edit.",
        "",
        *(inspect.getdoc(team_config) or "").splitlines(),
        "",
        "Paths are relative to the file's folder. `plan --explain` names the file each value came from.",
        "",
        "| key | TOML type | levels | flag | what |",
        "| --- | --- | --- | --- | --- |",
    ]
    for key in (*team_config.KEYS, *team_config.LIST_KEYS):
        flag = (
            "--" + key.replace("_", "-").removesuffix("s")
            if key == "wheel_sources"
            else "--" + key.replace("_", "-")
        )
        kind = "list of strings" if key in team_config.LIST_KEYS else "string"
        if key in team_config.PATHS:
            kind += " (a path)"
        where = "project, user, site" if key in team_config.USER_KEYS else "project"
        what = team_config.KEY_HELP.get(key) or help_of.get(flag, "")
        shown = f"`{flag}`" if flag in help_of else "-"
        out.append(f"| `{key}` | {kind} | {where} | {shown} | {_cell(what)} |")
    return "\n".join(out) + "\n"


# --- the matrix ---------------------------------------------------------------------------------


def _run_cli(argv: list[str]) -> tuple[int, dict[str, Any]]:
    """The CLI in this process, its --json envelope."""
    from verl_setup.cli import main_inner  # noqa: PLC0415

    buffer, saved = io.StringIO(), sys.stdout
    sys.stdout = buffer
    try:
        code = main_inner(argv)
    finally:
        sys.stdout = saved
    return code, json.loads(buffer.getvalue())


def matrix_rows() -> tuple[str, list[dict[str, Any]]]:
    _, envelope = _run_cli(["matrix", "list", "--json", "--no-config", "-q"])
    return envelope["data"]["sha256"], envelope["data"]["rows"]


def matrix_page() -> str:
    sha, rows = matrix_rows()
    out = [
        "# The matrix",
        "",
        f"Generated from `matrices/` by `tasks/gen_docs.py` (matrix sha256 `{sha[:12]}`); do not edit.",
        f"{len(rows)} rows. **Proof** is the furthest step a recorded run reached (`resolves`,",
        "`installs`, `imports`); **whole** means it reached it with every package of the row, **reduced**",
        "that some were left out (named). [Proof levels](explanation/proof-levels.md) explains them.",
        "",
        "## Which row is mine?",
        "",
        "Pick the machine; the answer is what `verl-setup plan` chose for exactly these inputs",
        "when the docs were built. Run `plan --explain` on the machine itself for its own facts.",
        "A GPU machine is described by flags alone; the CPU machine is `docs/assets/cpu-host.json`",
        "(a host with no Python found, so the row's recommended Python is taken).",
        "",
        '<div id="selector" markdown="0">',
        *(
            f'<label>{name} <select id="sel-{name}">'
            + "".join(f'<option value="{v}">{label}</option>' for v, label in GRID[name])
            + "</select></label>"
            for name in GRID
        ),
        '<div id="answer"><p>(the selector needs JavaScript)</p></div>',
        "</div>",
        "",
        "## Every row",
        "",
        "| row | verl | engine | backend | torch (CUDA) | Python | arch | glibc ≥ | driver ≥ "
        "| compute capability | proof |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        req = r["requires"]
        driver = (req.get("driver") or {}).get("compat") or "-"
        cc = req.get("compute_capability") or {}
        cc_text = f"{cc.get('min', '')}-{cc.get('max', '')}" if cc else "-"
        engine = r["engine"]["name"] + (f" {r['engine']['version']}" if r["engine"]["version"] else "")
        pythons = ", ".join(r["python"]["supported"])
        out.append(
            f"| [`{r['id']}`](#{_anchor(r['id'])}) | {r['verl']['version']} | {engine} | {r['backend']} | "
            f"{r['torch']['version']} ({r['torch']['cuda'] or 'cpu'}) | {pythons} | "
            f"{', '.join(req['arch'])} | {req.get('glibc') or '-'} | {driver} | {cc_text} | {_proof(r)} |"
        )
    out.append("")
    for r in rows:
        out += [f"### {r['id']}", ""]
        if r.get("deprecated"):
            out += ["Deprecated.", ""]
        out += [
            f"Proof: {_proof(r)}. {_cell(r['proof']['detail'])}",
            "",
            "| pin | version | evidence |",
            "| --- | --- | --- |",
        ]
        pins = {"verl": r["verl"]["version"], "torch": r["torch"]["version"], **r["packages"]}
        if r["engine"]["version"]:
            pins = {"verl": pins.pop("verl"), r["engine"]["name"]: r["engine"]["version"], **pins}
        for name, version in pins.items():
            key = "engine" if name == r["engine"]["name"] else name
            out.append(f"| {name} | {version} | {_cell(r['evidence'].get(key, ''))} |")
        for key, text in r["evidence"].items():
            if key.startswith("requires.") or key == "python":
                out.append(f"| {key} | | {_cell(text)} |")
        out.append("")
        for issue in r.get("known_issues", []):
            out += [f"- Known issue: {_cell(str(issue.get('summary') or issue))}"]
        if r.get("known_issues"):
            out.append("")
    return "\n".join(out).rstrip() + "\n"


def _anchor(row_id: str) -> str:
    return re.sub(r"[^a-z0-9_-]", "", row_id.lower().replace(" ", "-"))


def _proof(row: dict[str, Any]) -> str:
    proof = row["proof"]
    if proof["level"] in (None, "none", "-"):
        return "unproven"
    whole = "whole" if proof["whole_stack"] else "reduced (without " + ", ".join(proof["left_out"]) + ")"
    return f"{proof['level']}, {whole}"


def plan_answer(inputs: dict[str, str]) -> dict[str, Any]:
    """What `plan` says for one input: the row, the Python, its text (why), and the install line.
    The page writes the plan line itself from the selects (plan_argv's flags; the browser test
    holds the two equal)."""
    from verl_setup.commands.common import plan_inputs  # noqa: PLC0415
    from verl_setup.commands.text_output import plan_text  # noqa: PLC0415
    from verl_setup.errors import NoCompatibleRowError  # noqa: PLC0415
    from verl_setup.plan.make import make_plan  # noqa: PLC0415

    try:
        argv = [str(ROOT / a) if a == CPU_HOST else a for a in plan_argv(inputs)]
        plan = make_plan(plan_inputs(parse(argv)), {"HOME": os.environ.get("HOME", "/")})
    except NoCompatibleRowError as exc:
        return {"row": None, "why": str(exc)}
    data = plan.to_json()
    row = data["row"]["id"]
    install = ["install", "--row", row, "--python", data["python"]]
    return {
        "row": row,
        "python": data["python"],
        "why": plan_text(plan, explain=False),
        "install": "verl-setup " + shlex.join(install),
    }


def selector_data() -> str:
    """The grid as a script: answers are stored once and keyed by index (most inputs share one)."""
    sha, _ = matrix_rows()
    answers: list[str] = []
    index: dict[str, int] = {}
    keys: dict[str, int] = {}
    for inputs in grid_inputs():
        answer = plan_answer(inputs)
        text = json.dumps(answer, sort_keys=True)
        keys[grid_key(inputs)] = index.setdefault(text, len(index))
        if index[text] == len(answers):
            answers.append(text)
    grid = {
        "matrix_sha256": sha,
        "code_sha256": code_digest(),
        "inputs": list(GRID),
        "answers": [json.loads(a) for a in answers],
        "keys": keys,
    }
    return "window.VERL_SETUP_GRID = " + json.dumps(grid, sort_keys=True, separators=(",", ":")) + ";\n"


def code_digest() -> str:
    """sha256 of the selection code (plan/, matrix/) and this task: a grid older than either is stale."""
    h = hashlib.sha256()
    for path in sorted(
        [*(PACKAGE / "plan").rglob("*.py"), *(PACKAGE / "matrix").rglob("*.py"), Path(__file__)]
    ):
        h.update(path.read_bytes())
    return h.hexdigest()


def pages() -> dict[Path, str]:
    """Every generated page but the grid, by path (quick: no plan runs)."""
    return {
        DOCS / "reference" / "cli.md": cli_page(),
        DOCS / "reference" / "environment.md": environment_page(),
        DOCS / "reference" / "exit-codes.md": exit_codes_page(),
        DOCS / "reference" / "schemas.md": schemas_page(),
        DOCS / "reference" / "team-config.md": team_config_page(),
        DOCS / "matrix.md": matrix_page(),
    }


GRID_FILE = DOCS / "assets" / "selector-data.js"


def main(argv: list[str]) -> int:
    check = "--check" in argv
    wanted = pages()
    if "--no-grid" not in argv:
        wanted[GRID_FILE] = selector_data()
    stale = [p for p, text in wanted.items() if not p.is_file() or p.read_text(encoding="utf-8") != text]
    if check:
        for path in stale:
            print(f"stale: {path.relative_to(ROOT)} (run python tasks/gen_docs.py)", file=sys.stderr)
        return 1 if stale else 0
    for path in stale:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(wanted[path], encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    importlib.import_module("verl_setup.commands.plan")  # the plan flags' module, as parse() loads it
    raise SystemExit(main(sys.argv[1:]))
