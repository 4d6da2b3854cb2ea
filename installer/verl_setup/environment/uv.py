"""uv as we drive it: the binary (util/uvbin.py), and build the venv, install, sync and compile commands."""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from verl_setup.errors import InstallError
from verl_setup.matrix.load import Matrix
from verl_setup.matrix.schema import Row
from verl_setup.util.binary import binary_only

# The glibc platforms uv can resolve for (`uv pip compile --python-platform`): a row's floor maps
# to the newest of them at or below it. Resolutions are binary-only, so a row that claims a
# floor below its wheels fails to resolve, naming the package, instead of building its sdist.
UV_MANYLINUX = ((2, 17), (2, 28), *((2, m) for m in range(31, 41)))


def python_platform(row: Row, arch: str | None = None) -> str:
    """uv's --python-platform for a row: its (first) architecture and glibc floor."""
    floor = tuple(int(p) for p in row.requires.glibc.split("."))
    major, minor = max((p for p in UV_MANYLINUX if p <= floor), default=UV_MANYLINUX[0])
    return f"{arch or row.requires.arch[0]}-manylinux_{major}_{minor}"


def write_inputs(
    row: Row,
    folder: Path,
    requirements_lines: Sequence[str] | None = None,
    overrides_lines: Sequence[str] | None = None,
    *,
    constraints: Sequence[str] = (),
) -> tuple[Path, Path | None]:
    """requirements.in (the row's pins unless given), overrides.txt when the row has overrides (or
    `overrides_lines`: the recipe's, which --keep extends), and constraints.txt (the row's closure)
    when it has one."""
    folder.mkdir(parents=True, exist_ok=True)
    requirements = folder / "requirements.in"
    lines = row.requirements() if requirements_lines is None else requirements_lines
    requirements.write_text("\n".join(lines) + "\n", encoding="utf-8")
    overrides = None
    held = row.overrides if overrides_lines is None else overrides_lines
    if held:
        overrides = folder / "overrides.txt"
        overrides.write_text("\n".join(held) + "\n", encoding="utf-8")
    if constraints:
        (folder / "constraints.txt").write_text("\n".join(constraints) + "\n", encoding="utf-8")
    return requirements, overrides


def compile_command(
    uv: str,
    *,
    row: Row,
    matrix: Matrix,
    python: str,
    requirements: Path,
    overrides: Path | None,
    hashes: bool = False,
    constraints: Path | None = None,
    exclude_newer: str | None = None,
    arch: str | None = None,
) -> list[str]:
    """`uv pip compile` for the row's target Python and platform, from any machine."""
    argv = [
        uv, "pip", "compile", str(requirements),
        "--python-version", python,
        "--python-platform", python_platform(row, arch),
        "--no-python-downloads",
        "--no-header",
        "--quiet",
    ]  # fmt: skip
    if overrides is not None:
        argv += ["--override", str(overrides)]
    if constraints is not None:
        argv += ["--constraint", str(constraints)]
    if exclude_newer is not None:
        argv += ["--exclude-newer", exclude_newer]
    argv += index_flags(matrix.index_url(row))
    argv += binary_only(matrix.rows_file.built_from_sdist(row))
    if hashes:
        argv.append("--generate-hashes")
    return argv


def index_flags(index_url: str | None) -> list[str]:
    """The row's extra index: torch lives there, the rest stays on the user's default index."""
    if index_url is None:
        return []
    return ["--extra-index-url", index_url, "--index-strategy", "unsafe-best-match"]


def venv_command(uv: str, *, path: Path, python: str) -> list[str]:
    """`uv venv` for a staging dir: relocatable, since the finished venv is renamed into place."""
    return [uv, "venv", "--relocatable", "--no-project", "--python", python, str(path)]


def install_command(
    uv: str,
    *,
    python_exe: Path,
    requirements: Path,
    overrides: Path | None,
    index_url: str | None,
    sdists: Sequence[str] = (),
) -> list[str]:
    """`uv pip install` of a row's exact pins into the interpreter's environment, binary-only."""
    argv = [uv, "pip", "install", "--python", str(python_exe), "-r", str(requirements)]
    if overrides is not None:
        argv += ["--override", str(overrides)]
    return argv + index_flags(index_url) + binary_only(sdists)


def sync_command(
    uv: str, *, python_exe: Path, lock: Path, index_url: str | None, sdists: Sequence[str] = ()
) -> list[str]:
    """`uv pip sync` of a hashed lock: exactly its distributions, every hash enforced, wheels only
    except the sdists the row builds on purpose."""
    argv = [uv, "pip", "sync", "--python", str(python_exe), "--require-hashes", str(lock)]
    return argv + index_flags(index_url) + binary_only(sdists)


@functools.cache
def uv_version(uv: str) -> str:
    """`uv --version` as "0.13.9" (recorded in locks and manifests); find_uv's answer when it
    found this binary."""
    from verl_setup.util.runner import ProgramError, run  # noqa: PLC0415
    from verl_setup.util.uvbin import known_version  # noqa: PLC0415

    known = known_version(uv)
    if known is not None:
        return known
    try:
        out = run([uv, "--version"], timeout=30)
    except ProgramError as exc:
        raise InstallError(f"cannot run uv: {exc}") from exc
    parts = out.stdout.split()
    if out.returncode != 0 or len(parts) < 2:
        raise InstallError(f"`{uv} --version` failed: {(out.stderr or out.stdout).strip()[:200]}")
    return parts[1]


def cache_dir(uv: str, env: Mapping[str, str]) -> Path | None:
    """Where uv keeps its cache for this environment (`uv cache dir`), or None if it cannot say."""
    from verl_setup.util.runner import ProgramError, run  # noqa: PLC0415

    try:
        out = run([uv, "cache", "dir"], timeout=30, env=env)
    except ProgramError:
        return None
    text = out.stdout.strip()
    return Path(text) if out.returncode == 0 and text else None


# The user's uv settings that would change what a row resolves to, behind the row's back: the row
# names torch's index, every pin, its overrides and the index strategy. Everything else in the
# shell reaches uv: the default index (UV_INDEX_URL, UV_DEFAULT_INDEX: mirrors), a local wheelhouse
# (UV_FIND_LINKS, UV_NO_INDEX: an air gap; hashes still hold), credentials, certificates, proxies,
# the cache, UV_OFFLINE, timeouts, link mode. A uv.toml's torch-backend still applies: uv has no flag
# that undoes it short of --no-config, which would drop the user's mirror too.
ROW_DECIDES: dict[str, str] = {
    "UV_TORCH_BACKEND": "sends torch to PyTorch's own index for the GPU uv sees",
    "UV_INDEX": "adds an index that can serve torch (`torch==X` admits `X+cpu`)",
    "UV_EXTRA_INDEX_URL": "adds an index that can serve torch (`torch==X` admits `X+cpu`)",
    "UV_INDEX_STRATEGY": "changes which index wins for a package several serve",
    "UV_PRERELEASE": "admits pre-releases among the dependencies",
    "UV_RESOLUTION": "resolves the dependencies to their lowest versions",
    "UV_EXCLUDE_NEWER": "hides releases the row's pins may need",
    "UV_CONSTRAINT": "adds constraints the row does not carry",
    "UV_OVERRIDE": "replaces the row's own overrides",
    "UV_BUILD_CONSTRAINT": "constrains the build of sdists the row builds",
    "UV_NO_BINARY": "builds from sdists where the row takes wheels",
    "UV_NO_BINARY_PACKAGE": "builds from sdists where the row takes wheels",
    "UV_NO_BUILD": "refuses sdists the row builds",
    "UV_NO_BUILD_PACKAGE": "refuses sdists the row builds",
    "UV_NO_BUILD_ISOLATION": "builds every sdist against whatever is installed",
    "UV_NO_BUILD_ISOLATION_PACKAGE": "builds sdists against whatever is installed",
}


def uv_env(
    *,
    python_downloads: bool = False,
    base: Mapping[str, str] | None = None,
    warn: Callable[[str], None] | None = None,
) -> dict[str, str]:
    """The environment for uv: the user's, less ROW_DECIDES (named through `warn`), and no Python
    downloads behind the user's back unless they allow them."""
    env = dict(os.environ if base is None else base)
    dropped = [name for name in ROW_DECIDES if name in env]
    for name in dropped:
        del env[name]
    if dropped and warn is not None:
        warn(f"warning: {not_passed(dropped)}")
    env["UV_PYTHON_DOWNLOADS"] = "automatic" if python_downloads else "never"
    return env


def not_passed(names: Sequence[str]) -> str:
    """One line naming the user's uv settings that uv does not get, and why (never their values:
    an index URL may carry a password)."""
    shown = ", ".join(f"{n} ({ROW_DECIDES[n]})" for n in names)
    return f"not passed to uv, since the row decides what it resolves: {shown}"


_NO_WHEEL = re.compile(
    r"Because (?:there is no version of )?([A-Za-z0-9][A-Za-z0-9._-]*)(?:\{[^}]*\})?"
    r"(?:[=<>!~,.0-9A-Za-z]*) has no "
    r"(?:usable wheels|wheels with a matching platform tag(?: \(e\.g\., `([^`]+)`\))?)"
)
_BUILT = re.compile(r"Failed to (?:build|download and build) `([^`]+)`")
_PACKAGE = re.compile(r"`([A-Za-z0-9][A-Za-z0-9._-]*)(?:==[^`]*)?`")
_FETCHED = re.compile(r"Failed to (?:download|read|fetch) `([A-Za-z0-9][A-Za-z0-9._-]*)")
_NOT_CACHED = re.compile(r"Because ([A-Za-z0-9][A-Za-z0-9._-]*) was not found in the cache")


def explain_failure(stderr: str) -> str:  # noqa: PLR0911  # one return per known cause
    """uv's failure in one line, led by the package at fault and the likely cause."""
    message = uv_error(stderr)
    no_wheel = _NO_WHEEL.search(stderr)
    if no_wheel:
        platform = f" ({no_wheel[2]})" if no_wheel[2] else ""
        return (
            f"{no_wheel[1]} has no wheel for this Python and platform{platform}, and installs are "
            f"binary-only (no surprise compile of its sdist): a newer glibc (the row's "
            f"requires.glibc), another row, or a matrix that lists it under `sdists` (uv: {message})"
        )
    built = _BUILT.search(stderr)
    if built and "No module named 'torch'" in stderr:
        return (
            f"{built[1]} builds against torch, and uv built it in an isolated environment without "
            f"torch: it must be installed after torch with --no-build-isolation (for flash-attn: "
            f"--build-flash-attn, or a prebuilt wheel) (uv: {message})"
        )
    if built:
        return (
            f"{built[1]} has no wheel for this Python and platform, and building its sdist failed "
            f"(a compiler, nvcc or a build dependency missing?) (uv: {message})"
        )
    if "was not found in the cache" in stderr or "the network was disabled" in stderr:
        # M1: offline (UV_OFFLINE or --offline) with a cache that lacks a pin: no conflict at all
        missing = _NOT_CACHED.search(stderr)
        lacking = f"{missing[1]} is not in the uv cache" if missing else "a pin is not in the uv cache"
        return (
            f"offline (UV_OFFLINE=1 or --offline) and {lacking}: run once with the network, or install "
            f"from a bundle (`verl-setup bundle`, then `install --offline DIR`) (uv: {message})"
        )
    lowered = stderr.lower()
    if "does not start with the normalized package name" in lowered or "does not match given name" in lowered:
        # W6: the wheel's own metadata names another project; nothing was unreachable
        fetched = _FETCHED.search(stderr)
        name = f"{fetched[1]}: " if fetched else ""
        return (
            f"{name}the wheel's metadata names another project than its file name does (the file or "
            f"its index is wrong); refused (uv: {message})"
        )
    if "No solution found" in stderr or "unsatisfiable" in stderr:
        because = next((ln.strip() for ln in stderr.splitlines() if "Because" in ln), message)
        return f"the pins conflict: {because}"
    if "certificate" in lowered:
        return (
            f"TLS verification failed: does a proxy re-sign HTTPS? pass its CA (--ca-bundle) (uv: {message})"
        )
    if any(
        s in lowered
        for s in (
            "failed to fetch",
            "error sending request",
            "dns error",
            "connection refused",
            "failed to download",
            "network",
        )
    ):
        what = _PACKAGE.search(stderr)
        name = f"{what[1]}: " if what else ""
        return f"{name}the index or a wheel URL could not be reached (network, proxy, index?) (uv: {message})"
    if (
        "not found in the package registry" in lowered
        or "no versions of" in lowered
        or "was not found" in lowered
    ):
        return f"a pinned release is not on the index (yanked, deleted, another index?): {message}"
    if "no interpreter found" in lowered or "no download found" in lowered:
        return f"uv could not find or download the Python asked for: {message}"
    return message


def uv_error(stderr: str) -> str:
    """uv's failure in one line: its `error:` line and the innermost cause."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("error:")]
    causes = [
        ln.removeprefix("cause:").removeprefix("Caused by:").strip()
        for ln in lines
        if ln.startswith(("cause:", "Caused by:"))
    ]
    parts = [errors[0].removeprefix("error:").strip()] if errors else lines[-1:]
    if causes:
        parts.append(causes[-1])
    return ": ".join(parts) or "no message"


def uv_and_env(env: Mapping[str, str], warn: Callable[[str], None]) -> tuple[str, dict[str, str]]:
    """The uv to run (the bundled one) and the environment to run it in (uv_env)."""
    from verl_setup.util.uvbin import find_uv  # noqa: PLC0415

    return find_uv(), uv_env(base=env, warn=warn)
