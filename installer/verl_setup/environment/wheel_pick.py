"""At install (and lock) time: look each wheel the recipe expects from an index source up in that
index, in the sources' order, and pin the file taken (its URL and sha256).

An index is a PEP 503 simple index (`DIR/simple/<name>/index.html`, as a folder, file:// or
http(s)://), or a flat folder of wheels. A wheel is skipped when its tags do not fit the target
or its source says it was built for another torch (the local version label in its name, or the
`<file>.whl.json` manifest beside it); one that says nothing is taken, and the ABI check after it
lands decides.
"""

from __future__ import annotations

import dataclasses
import hashlib
import html.parser
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit, urlunsplit

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from verl_setup.errors import BadInputError, InstallError
from verl_setup.matrix.schema import ExtensionFacts
from verl_setup.matrix.wheel_seen import load_seen, wheel_key, world_of
from verl_setup.plan.build_host import build_jobs
from verl_setup.plan.refusal import refusal, unreachable_refusal, without_reason
from verl_setup.plan.select import Plan
from verl_setup.plan.steps import ExtensionPlan, Recipe
from verl_setup.plan.wheel_sources import Candidate, replaced, torch_in_name, torch_minor
from verl_setup.plan.whole_wheel import in_place_of
from verl_setup.util import web
from verl_setup.util.bounded import BoundError, loads_json, one_line
from verl_setup.util.versions import minor_of

# A hung index costs seconds, not minutes: one page or manifest (headers and body together), one
# source's pages and manifests; a host found down is not asked again in this run (_down).
DEADLINE_S = 10.0
SOURCE_DEADLINE_S = 60.0
WHEEL_DEADLINE_S = 1800.0  # one wheel's bytes (flash-attn's are about 250 MB)
MAX_PAGE = 4 * 2**20
UNREACHABLE = "unreachable"  # the word pick's reason carries for refusal.py
_down: dict[str, str] = {}  # netloc -> why, for this process


@dataclass(frozen=True, kw_only=True)
class Picked:
    """The wheel file taken from a source, and what its source says it was built for."""

    url: str
    sha256: str | None
    torch: str | None  # the torch its name or manifest names; None: the source does not say
    source: str
    distribution: str | None = None  # a whole-project wheel (ExtensionFacts.whole) in the package's place


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        href = dict(attrs).get("href")
        if tag == "a" and href:
            self.hrefs.append(href)


def _read(url: str, deadline_s: float = DEADLINE_S) -> tuple[bytes, str]:
    """A page or manifest from a folder or a URL, and the URL it finally came from (relative
    links join that one, as pip and uv do); OSError (web.WebError for http) when it cannot be had."""
    parts = urlsplit(url)
    if parts.scheme == "file":
        with Path(unquote(parts.path)).open("rb") as handle:
            return handle.read(MAX_PAGE), url
    host = parts.netloc
    if host in _down:
        raise OSError(_down[host])
    try:
        return web.read(url, limit=MAX_PAGE, deadline_s=deadline_s)
    except web.NotFoundError as exc:  # no such page: the index does not hold that project
        raise FileNotFoundError(str(exc)) from exc
    except OSError as exc:
        _down[host] = str(exc)
        raise


def wheel_links(index_url: str, name: str) -> list[str]:
    """Every file URL the index lists for the package (with its #sha256= fragment, if any)."""
    page = urljoin(index_url, f"{canonicalize_name(name)}/")
    flat = urlsplit(index_url).scheme == "file" and not Path(unquote(urlsplit(page).path)).is_dir()
    if flat:  # a folder of wheels, as find-links reads one
        folder = Path(unquote(urlsplit(index_url).path))
        return [p.as_uri() for p in sorted(folder.glob("*.whl"))]
    body, final = _read(page + ("index.html" if urlsplit(page).scheme == "file" else ""))
    parser = _Links()
    parser.feed(body.decode("utf-8", "replace"))
    links = [urljoin(_with_credentials(final, page), href) for href in parser.hrefs]
    return [link for link in links if _allowed_link(page, link)]


def _with_credentials(final: str, asked: str) -> str:
    """The final URL with the credentials of the one asked, when it stayed on the same host (the
    links it lists are then fetched with them too)."""
    a, f = urlsplit(asked), urlsplit(final)
    if a.username is None or (a.scheme, a.hostname, a.port) != (f.scheme, f.hostname, f.port):
        return final
    return urlunsplit(f._replace(netloc=a.netloc))


def _allowed_link(page: str, link: str) -> bool:
    """W7: a page on the web never points a pin at this machine's files (file://), and an HTTPS
    page's link never downgrades to plain HTTP; those links are dropped (and named when nothing
    else fits)."""
    page_scheme, link_scheme = urlsplit(page).scheme, urlsplit(link).scheme
    if page_scheme == "file":
        return link_scheme in ("file", "http", "https")
    if link_scheme not in ("http", "https"):
        return False
    return not (page_scheme == "https" and link_scheme == "http")


def wheel_digest(url: str) -> str:
    """The sha256 of the wheel's bytes, read through the same client (a file:// URL from disk)."""
    digest = hashlib.sha256()
    parts = urlsplit(url)
    if parts.scheme == "file":
        with Path(unquote(parts.path)).open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        return digest.hexdigest()
    with web.get(url, deadline_s=WHEEL_DEADLINE_S) as answer:
        for block in answer.blocks:
            digest.update(block)
    return digest.hexdigest()


def _fits(filename: str, name: str, version: str, python: str, arch: str) -> bool:
    try:
        dist, found, _build, tags = parse_wheel_filename(filename)
    except (InvalidWheelFilename, InvalidVersion):
        return False
    if dist != canonicalize_name(name) or Version(found.public) != Version(Version(version).public):
        return False
    py = "cp" + minor_of(python).replace(".", "")
    return any(t.interpreter in (py, "py3") and t.platform.endswith(arch) for t in tags)


def _manifest_torch(url: str, deadline: float) -> str | None:
    left = deadline - time.monotonic()
    if left <= 0:
        raise web.DeadlineError(f"{web.shown(url)}: the source's manifests did not arrive in time")
    try:
        data = loads_json(_read(url.split("#", 1)[0] + ".json", min(left, DEADLINE_S))[0], "wheel manifest")
    except web.DeadlineError:
        raise
    except (OSError, ValueError, BoundError):
        return None
    torch = data.get("torch") if isinstance(data, dict) else None
    return torch if isinstance(torch, str) else None


def _names(candidate: Candidate, ext: ExtensionPlan, plan: Plan) -> list[str | None]:
    """The distributions to look for: the whole project's wheel (None: the package's own)."""
    if candidate.distribution is not None:
        return [candidate.distribution]
    whole = plan.matrix.rows_file.torch_extensions[ext.name].whole
    return [whole, None] if whole is not None else [None]


def pick(candidate: Candidate, ext: ExtensionPlan, plan: Plan) -> tuple[Picked | None, str]:
    """The wheel this source has for the target, else None and why not."""
    assert candidate.index_url is not None  # noqa: S101  # only index candidates are looked up
    want = torch_minor(plan.row)
    other: list[str] = []
    deadline = time.monotonic() + SOURCE_DEADLINE_S  # W3: one source, all its pages and manifests
    for whole in _names(candidate, ext, plan):
        name = whole or ext.name
        try:
            links = wheel_links(candidate.index_url, name)
        except FileNotFoundError:
            if whole is not None:
                continue  # the index has no page for the whole project: look for the package's own
            links = []  # no page for the package (HTTP 404): the source has no such wheel
        except OSError as exc:
            where = web.shown(candidate.index_url)
            return None, f"{candidate.source}: {UNREACHABLE} ({where}: {one_line(web.shown(str(exc)), 120)})"
        for link in links:
            url, _, fragment = link.partition("#")
            filename = unquote(url.rsplit("/", 1)[-1])
            if not _fits(filename, name, ext.version, plan.python, plan.row.requires.arch[0]):
                continue
            torch = torch_in_name(filename) if candidate.torch_from != "index-path" else want
            try:
                torch = torch or _manifest_torch(url, deadline)
            except OSError as exc:
                return None, f"{candidate.source}: unreachable ({one_line(web.shown(str(exc)), 160)})"
            if torch is not None and minor_of(torch) != want:
                other.append(torch)
                continue
            claimed = fragment.removeprefix("sha256=") if fragment.startswith("sha256=") else None
            sha256 = _checked_digest(url, claimed, candidate.source)
            taken = Picked(url=url, sha256=sha256, torch=torch, source=candidate.source, distribution=whole)
            return taken, ""
    where = _last_seen(candidate, plan, ext)
    if other:
        return None, f"{candidate.source}: only wheels built for torch {', '.join(sorted(set(other)))}{where}"
    return (
        None,
        f"{candidate.source}: no {ext.name} {ext.version} wheel for {plan.python} on this platform "
        f"any more{where}",
    )


def _last_seen(candidate: Candidate, plan: Plan, ext: ExtensionPlan) -> str:
    """ " (world cu130/torch2.11 at URL; last seen 2026-12-01 by `matrix check`)" for a matrix
    source whose index is one per world; "" for the others."""
    if candidate.torch_from != "index-path" or candidate.trust == "user":
        return ""
    world = world_of(plan.row.torch.cuda, torch_minor(plan.row))
    seen = load_seen(plan.matrix.path).get(candidate.source)
    name = candidate.distribution or ext.name
    wheel = (
        None
        if seen is None
        else seen.wheels.get(wheel_key(world, name, ext.version, plan.python, plan.row.requires.arch[0]))
    )
    if seen is None:
        when = "never checked by `matrix check`"
    elif wheel is None or wheel.last_seen is None:
        when = f"not seen at `matrix check` {seen.checked}"
    else:
        when = f"last seen {wheel.last_seen} by `matrix check`"
    return f" (world {world} at {candidate.index_url}; {when})"


def _checked_digest(url: str, claimed: str | None, source: str) -> str:
    """W1: the sha256 of the bytes fetched, which must be the one the index gives (if it gives
    one); the pin and the install record carry ours, never the index's claim."""
    try:
        got = wheel_digest(url)
    except OSError as exc:
        raise InstallError(
            f"{source}: the wheel could not be read ({one_line(web.shown(str(exc)), 200)})"
        ) from exc
    if claimed is not None and claimed.lower() != got:
        raise InstallError(
            f"{web.shown(url)}: its bytes have sha256 {got}, but {source} lists "
            f"sha256 {one_line(claimed, 80)} for it; refused (the file or the index was altered)"
        )
    return got


def resolve_wheels(plan: Plan, recipe: Recipe, say: Callable[[str], None]) -> Recipe:
    """The recipe with every wheel from an index pinned to the file taken; InstallError (before
    anything changes) when no source has one."""
    facts = plan.matrix.rows_file.torch_extensions
    for ext in recipe.extensions:
        if ext.mode != "wheel" or ext.url is not None:
            continue
        why_not: list[str] = []
        for candidate in ext.candidates:
            if candidate.url is not None:  # a release asset: named by its pattern, taken as it is
                taken = Picked(
                    url=candidate.url, sha256=candidate.sha256, torch=None, source=candidate.source
                )
                recipe = _pin(recipe, ext, taken, candidate.reason, facts)
                break
            found, why = pick(candidate, ext, plan)
            if found is None and candidate.trust == "user" and ": unreachable (" in why:
                raise BadInputError(f"wheel source {why}; nothing was changed")
            if found is None or (ext.distribution is not None and found.distribution != ext.distribution):
                # A recipe planned around a whole-project wheel has no step for its companions.
                why_not.append(why or f"{candidate.source}: no {ext.distribution} wheel")
                continue
            said = f"built for torch {found.torch}" if found.torch else "its torch is read by the ABI check"
            say(f"{ext.name} {ext.version}: {found.url.rsplit('/', 1)[-1]} from {found.source} ({said})")
            reason = f"prebuilt wheel from {found.source}, {said}"
            if found.distribution is not None:
                reason += f"; {replaced(facts[ext.name], ext.name, plan.row)}"
            recipe = _pin(recipe, ext, found, reason, facts)
            break
        else:
            raise InstallError(
                unreachable_refusal(why_not, ext.name)
                or refusal(
                    plan.row,
                    ext.name,
                    facts[ext.name],
                    why_not=why_not,
                    without=without_reason(facts[ext.name], plan.row.verl.version),
                    jobs=build_jobs(),
                )
            )
    return recipe


def _pin(
    recipe: Recipe, ext: ExtensionPlan, taken: Picked, reason: str, facts: Mapping[str, ExtensionFacts]
) -> Recipe:
    pinned = dataclasses.replace(
        ext,
        url=taken.url,
        sha256=taken.sha256,
        source=taken.source,
        reason=reason,
        distribution=taken.distribution or ext.distribution,
    )
    steps = []
    for step in recipe.steps:
        if step.name != ext.name:
            steps.append(step)
            continue
        kept = tuple(r for r in step.requirements if r != ext.requirement)
        steps.append(
            dataclasses.replace(
                step,
                requirements=(*kept, pinned.requirement),
                extra_index_url=None,
                no_build=(),
                title=f"{ext.name} {ext.version} ({reason})",
            )
        )
    extensions = tuple(pinned if e.name == ext.name else e for e in recipe.extensions)
    return in_place_of(dataclasses.replace(recipe, steps=tuple(steps), extensions=extensions), facts)
