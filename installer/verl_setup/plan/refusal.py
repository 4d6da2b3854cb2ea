"""What a verl line can do without a package built against torch, and the one line install stops
with when no wheel source has that package's wheel (every way out, before anything changes)."""

from __future__ import annotations

from packaging.version import Version

from verl_setup.matrix.schema import ExtensionFacts, Row

# The command that builds a row's missing extensions once into a shared wheelhouse.
WHEELHOUSE_COMMAND = "verl-setup wheelhouse build"


def refusal(
    row: Row,
    name: str,
    facts: ExtensionFacts,
    *,
    why_not: list[str],
    without: str,
    jobs: int,
) -> str:
    """The one line install stops with when no source has the wheel: the choices, before anything changes."""
    version = row.packages[name]
    estimate = (
        f"about {max(1, round(facts.build_core_minutes / jobs))} min with {jobs} build jobs here"
        if facts.build_core_minutes
        else "an hour or more"
    )
    flag = "--build-flash-attn" if name == "flash-attn" else f"--build {name}"
    sources = "; ".join(why_not) or "no wheel source lists it"
    return (
        f"{name} {version} has no prebuilt wheel for torch {row.torch.version} in any enabled source "
        f"({sources}): build it once into a wheelhouse with `{WHEELHOUSE_COMMAND} --row {row.id}` "
        f"({estimate}, needs nvcc {row.torch.cuda}) and pass --wheel-source DIR, or {flag} to compile "
        f"it into this environment, or --without {name} ({without}); nothing was changed"
    )


def without_reason(facts: ExtensionFacts | None, verl_version: str) -> str:
    """What a run of this verl line can do without the package (read from its code; matrix data)."""
    if facts is not None:
        release = Version(verl_version).release
        for size in (2, 1):
            key = ".".join(str(p) for p in release[:size])
            if key in facts.without:
                return facts.without[key]
    return "the matrix does not say what this verl line does without it"


def unreachable_refusal(why_not: list[str], name: str) -> str | None:
    """The cause first when a wheel source could not be reached (a DNS failure, a proxy, a hung
    index): the wheel may well be there, so a build is the fallback, not the answer. None when
    every source answered."""
    down = [w for w in why_not if ": unreachable (" in w]
    if not down:
        return None
    source, _, detail = down[0].partition(": unreachable (")
    others = f"; also {'; '.join(w for w in why_not if w != down[0])}" if len(why_not) > 1 else ""
    return (
        f"could not reach {source} ({detail.removesuffix(')')}): check the network or proxy "
        f"(HTTPS_PROXY, SSL_CERT_FILE) and run again; or give a reachable copy with --wheel-source "
        f"DIR|URL, or --build {name} / --without {name}{others}; nothing was changed"
    )
