"""`--keep NAME`: a package a site builds itself (a vendor torch, a locally compiled flash-attn)
stays as the environment at the prefix has it. Its files are copied into the new environment
before the row's steps (by its RECORD), every step holds it at that version through uv's
overrides instead of the row's pin, and verify, the ABI check included, reads it as it is."""

from __future__ import annotations

import shutil
from dataclasses import replace
from email.parser import HeaderParser
from pathlib import Path

from packaging.utils import canonicalize_name

from verl_setup.errors import BadInputError, InstallError
from verl_setup.plan.steps import Recipe


def site_packages(prefix: Path) -> Path | None:
    """The environment's site-packages folder, if it has exactly one."""
    found = sorted(prefix.glob("lib/python3.*/site-packages"))
    return found[0] if len(found) == 1 else None


def installed(prefix: Path, names: tuple[str, ...]) -> dict[str, Path]:
    """name -> its .dist-info folder in the environment at `prefix`; BadInputError for one it lacks."""
    site = site_packages(prefix)
    found: dict[str, Path] = {}
    for info in sorted(site.glob("*.dist-info")) if site else ():
        try:
            meta = HeaderParser().parsestr((info / "METADATA").read_text(encoding="utf-8", errors="replace"))
        except OSError:
            continue
        found.setdefault(canonicalize_name(meta.get("Name", "")), info)
    missing = [n for n in names if n not in found]
    if missing:
        raise BadInputError(
            f"--keep {missing[0]}: the environment at {prefix} has no {missing[0]} installed, so there "
            "is nothing to keep (install the site's build there first); nothing was changed"
        )
    return {n: found[n] for n in names}


def version_of(info: Path) -> str:
    """The version a .dist-info folder records."""
    meta = HeaderParser().parsestr((info / "METADATA").read_text(encoding="utf-8", errors="replace"))
    return str(meta.get("Version", ""))


def keep_recipe(recipe: Recipe, kept: dict[str, str]) -> Recipe:
    """Every step without the row's pin of a kept package, and held to the installed version."""
    if not kept:
        return recipe

    def mine(req: str) -> bool:
        head = req.split(";", 1)[0].split("@", 1)[0]
        for sep in ("[", "=", "<", ">", "!", "~", " "):
            head = head.split(sep, 1)[0]
        return canonicalize_name(head) in kept

    steps = tuple(
        replace(s, requirements=tuple(r for r in s.requirements if not mine(r)), overrides=True)
        for s in recipe.steps
    )
    held = tuple(f"{n}=={v}" for n, v in kept.items())
    overrides = (*(o for o in recipe.overrides if not mine(o)), *held)
    verify = tuple(p for p in recipe.verify_pins if not mine(p))
    return replace(recipe, steps=steps, overrides=overrides, verify_pins=verify)


def copy_kept(infos: dict[str, Path], staging: Path) -> None:
    """Copy each kept distribution's files (its RECORD) into the staging environment."""
    target = site_packages(staging)
    if target is None:
        raise InstallError(f"{staging}: no site-packages to copy the kept packages into")
    for name, info in infos.items():
        source = info.parent
        try:
            lines = (info / "RECORD").read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise InstallError(f"--keep {name}: {info} has no RECORD to copy it by ({exc.strerror})") from exc
        for line in lines:
            rel = line.split(",", 1)[0]
            if not rel or rel.startswith(("..", "/")) or rel.endswith(".pyc"):
                continue  # scripts outside site-packages: the package itself is what is kept
            src, dst = source / rel, target / rel
            if src.is_file():
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dst)
