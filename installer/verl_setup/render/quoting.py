"""The quoting filters, one per kind of place a value lands (a shell word, a Dockerfile
instruction value, a YAML scalar, a TOML string, a docker env-file line, a comment), and the guard
that lets no other string reach a rendered file: values come from users, hosts and rows files a
team shares."""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

from jinja2 import pass_context
from markupsafe import Markup

from verl_setup.errors import BadInputError
from verl_setup.util.bounded import one_line

# What a template may print without a filter: words no shell, Dockerfile or YAML reads as syntax.
_PLAIN = re.compile(r"[A-Za-z0-9._+:/@%=,-]*")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _quoted(text: str) -> Markup:
    """A filter's output: the guard lets it through as it is (Markup is only the marker)."""
    return Markup(text)  # noqa: S704  # not HTML: the filters above quote for their own target


def shell(value: object) -> Markup:
    """One shell word that is exactly `value`, never expanded or split (also a word of a
    Dockerfile RUN line, whose SHELL is bash; the guard keeps line breaks out of a Dockerfile)."""
    text = str(value)
    if not any(c in text for c in "$`"):
        return _quoted(shlex.quote(text))
    # Single quotes would do, but shellcheck (SC2016) then flags every literal "$(": double
    # quotes with $, `, " and \ escaped are just as literal.
    return _quoted('"' + "".join("\\" + c if c in '$`"\\' else c for c in text) + '"')


def docker(value: object) -> Markup:
    """A double-quoted Dockerfile instruction value (ENV, ARG, LABEL): no variable expansion, no
    line break. Not for RUN lines: Docker hands those to the shell, which wants `shell`."""
    text = str(value)
    if _CONTROL.search(text):
        raise BadInputError(
            f"value {one_line(repr(text))} contains a control character, which a Dockerfile cannot carry"
        )
    return _quoted('"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$") + '"')


def yaml(value: object) -> Markup:
    """A YAML scalar: a JSON string is valid YAML and quotes everything that needs it."""
    return _quoted(json.dumps(str(value)))


def toml(value: object) -> Markup:
    """A TOML basic string (a value or a quoted key): `"` and `\\` escaped, every control character
    (tab included) as \\uXXXX; a lone surrogate, which no TOML file can hold, is refused."""
    text = str(value)
    if any("\ud800" <= c <= "\udfff" for c in text):
        raise BadInputError(f"value {one_line(ascii(text))} is not valid Unicode, which TOML cannot carry")
    escaped = "".join(
        "\\" + c if c in '"\\' else f"\\u{ord(c):04x}" if c < " " or c == "\x7f" else c for c in text
    )
    return _quoted(f'"{escaped}"')


def envfile(value: object) -> Markup:
    """docker --env-file takes the rest of the line literally; only a line break cannot pass."""
    text = str(value)
    if "\n" in text or "\r" in text or "\0" in text:
        raise BadInputError(
            f"value {one_line(repr(text))} contains a line break, which env.list cannot carry"
        )
    return _quoted(text)


def line(value: object) -> Markup:
    """Prose for a comment: one line, whatever it holds (a comment runs nothing else)."""
    return _quoted(one_line(str(value), limit=10_000))


def verbatim(value: object) -> Markup:
    """verl-setup's own code shipped as a file (the import probe): not a value from anyone."""
    return _quoted(str(value))


FILTERS = {"sh": shell, "docker": docker, "yaml": yaml, "toml": toml, "envfile": envfile, "line": line}


@pass_context
def guard(context: Any, value: Any) -> Any:
    """Jinja's finalize: every printed value is a filter's output, a number or a plain word, and
    none carries a line break into a Dockerfile (a new line there is a new instruction)."""
    plain = isinstance(value, str) and _PLAIN.fullmatch(value)
    if not (plain or isinstance(value, (Markup, int, float))):
        raise BadInputError(
            f"value {one_line(repr(value), limit=80)} would reach a rendered file unquoted"
            " (a template passes it through sh, docker, yaml, toml, envfile or line)"
        )
    if str(context.name).startswith("Dockerfile") and _CONTROL.search(str(value)):
        raise BadInputError(f"value {one_line(repr(value), limit=80)} would break a Dockerfile line")
    return value
