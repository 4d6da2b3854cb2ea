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
import html.parser
import json
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from verl_setup.errors import InstallError
from verl_setup.matrix.schema import ExtensionFacts
from verl_setup.matrix.wheel_seen import load_seen, wheel_key, world_of
from verl_setup.plan.build_host import build_jobs
from verl_setup.plan.recipe import ExtensionPlan, Recipe
from verl_setup.plan.refusal import refusal, unreachable_refusal, without_reason
from verl_setup.plan.select import Plan
from verl_setup.plan.wheel_sources import Candidate, replaced, torch_in_name, torch_minor
from verl_setup.plan.whole_wheel import in_place_of
from verl_setup.util.bounded import one_line
from verl_setup.util.versions import minor_of

# Per source, the whole page read (DNS, connect, TLS, body): a hung index costs seconds, and a host
# found down is not asked again in this run (every package, every manifest would wait anew).
TIMEOUT_S = 8.0
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


def _read(url: str) -> bytes:
    """A page or manifest from a folder or a URL; OSError when it cannot be had."""
    parts = urlsplit(url)
    if parts.scheme == "file":
        with Path(unquote(parts.path)).open("rb") as handle:
            return handle.read(MAX_PAGE)
    host = parts.netloc
    if host in _down:
        raise OSError(_down[host])
    try:
        return bounded_get(url, TIMEOUT_S)
    except FileNotFoundError:
        raise
    except OSError as exc:
        _down[host] = str(exc)
        raise


def bounded_get(url: str, seconds: float) -> bytes:
    """GET `url` within `seconds` in all (getaddrinfo has no timeout of its own: a worker thread
    does the fetch and is left behind if it overruns); FileNotFoundError on HTTP 404."""
    import concurrent.futures  # noqa: PLC0415

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="wheel-index")
    try:
        return pool.submit(_get, url, seconds).result(timeout=seconds)
    except concurrent.futures.TimeoutError as exc:
        raise OSError(f"no answer within {seconds:g} s") from exc
    finally:
        pool.shutdown(wait=False)


def _get(url: str, seconds: float) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=seconds) as response:  # noqa: S310  # http(s) only
            return bytes(response.read(MAX_PAGE))
    except urllib.error.HTTPError as exc:
        if exc.code == 404:  # no such page: the index does not hold that project
            raise FileNotFoundError(f"{url}: HTTP 404") from exc
        raise OSError(str(exc)) from exc
    except (urllib.error.URLError, TimeoutError, ValueError) as exc:
        raise OSError(str(getattr(exc, "reason", exc))) from exc


def wheel_links(index_url: str, name: str) -> list[str]:
    """Every file URL the index lists for the package (with its #sha256= fragment, if any)."""
    page = urljoin(index_url, f"{canonicalize_name(name)}/")
    flat = urlsplit(index_url).scheme == "file" and not Path(unquote(urlsplit(page).path)).is_dir()
    if flat:  # a folder of wheels, as find-links reads one
        folder = Path(unquote(urlsplit(index_url).path))
        return [p.as_uri() for p in sorted(folder.glob("*.whl"))]
    body = _read(page + ("index.html" if urlsplit(page).scheme == "file" else ""))
    parser = _Links()
    parser.feed(body.decode("utf-8", "replace"))
    return [urljoin(page, href) for href in parser.hrefs]


def _fits(filename: str, name: str, version: str, python: str, arch: str) -> bool:
    try:
        dist, found, _build, tags = parse_wheel_filename(filename)
    except (InvalidWheelFilename, InvalidVersion):
        return False
    if dist != canonicalize_name(name) or Version(found.public) != Version(Version(version).public):
        return False
    py = "cp" + minor_of(python).replace(".", "")
    return any(t.interpreter in (py, "py3") and t.platform.endswith(arch) for t in tags)


def _manifest_torch(url: str) -> str | None:
    try:
        data = json.loads(_read(url.split("#", 1)[0] + ".json"))
    except (OSError, ValueError):
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
    for whole in _names(candidate, ext, plan):
        name = whole or ext.name
        try:
            links = wheel_links(candidate.index_url, name)
        except FileNotFoundError:
            if whole is not None:
                continue  # the index has no page for the whole project: look for the package's own
            links = []  # no page for the package (HTTP 404): the source has no such wheel
        except OSError as exc:
            return (
                None,
                f"{candidate.source}: {UNREACHABLE} ({candidate.index_url}: {one_line(str(exc))[:120]})",
            )
        for link in links:
            url, _, fragment = link.partition("#")
            filename = unquote(url.rsplit("/", 1)[-1])
            if not _fits(filename, name, ext.version, plan.python, plan.row.requires.arch[0]):
                continue
            torch = torch_in_name(filename) if candidate.torch_from != "index-path" else want
            torch = torch or _manifest_torch(url)
            if torch is not None and minor_of(torch) != want:
                other.append(torch)
                continue
            sha256 = fragment.removeprefix("sha256=") if fragment.startswith("sha256=") else None
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
