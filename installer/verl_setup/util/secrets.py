"""Mask what must not reach a public issue: tokens, credentials in URLs, and (if asked) home paths."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Mapping

MASK = "***"

# Token formats with a fixed prefix, each as its issuer documents it.
_TOKENS = re.compile(
    r"\bhf_[A-Za-z0-9]{20,}"  # Hugging Face user access tokens
    r"|\bgh[pousr]_[A-Za-z0-9]{30,}|\bgithub_pat_[A-Za-z0-9_]{30,}"  # GitHub
    r"|\bsk-(?:proj-)?[A-Za-z0-9_-]{20,}"  # OpenAI-style API keys
    r"|\bAKIA[0-9A-Z]{16}\b"  # AWS access key ids
    r"|\bxox[abpr]-[A-Za-z0-9-]{10,}"  # Slack
)
# NAME=value and NAME: value where the name says it is a secret (WANDB_API_KEY, HF_TOKEN, ...).
_NAMED = re.compile(
    r"(?i)\b([A-Z0-9_]*(?:TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|ACCESS_KEY|AUTH)[A-Z0-9_]*)"
    r"(\s*[=:]\s*)(\"[^\"]*\"|'[^']*'|[^\s,;]+)"
)
# The same under quotes, as Python dicts and JSON print them (Ray's and verl's runtime_env and
# config dumps): 'WANDB_API_KEY': 'v', "hf_token": "v", 'aws_secret_access_key': b'v'.
_QUOTED = re.compile(
    r"(?i)([\"']([A-Z0-9_.-]*(?:TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|APIKEY|ACCESS_KEY|AUTH|CREDENTIAL)"
    r"[A-Z0-9_.-]*)[\"']\s*[:=]\s*b?)(\"[^\"]*\"|'[^']*'|[^\s,;}\]]+)"
)
# An HTTP Authorization header: its scheme (Bearer, token, Basic, Digest) and credentials.
_AUTH_HEADER = re.compile(
    r"(?i)\b((?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?)(?:[A-Za-z-]+\s+)?[^\s\"',;]+"
)
# Command lines that take a key as an argument: `wandb login KEY`, `--wandb-key KEY`, `--hf_token=X`.
_LOGIN = re.compile(r"(?i)\b(wandb\s+login\s+(?:--?[a-z-]+(?:=\S+)?\s+)*)(?!-)\S+")
_FLAG = re.compile(
    r"(?i)(--?[a-z0-9_-]*(?:token|secret|password|passwd|api[_-]?key|[_-]key)(?:=|\s+))(?!-)(\"[^\"]*\"|'[^']*'|\S+)"
)
# A variable's name that says it holds a credential: TOKEN or KEY as one of its words (HF_TOKEN,
# WANDB_API_KEY), or SECRET, PASSWORD, PASSWD, APIKEY or CREDENTIAL anywhere. TOKENIZERS_PARALLELISM
# is a word of its own and no secret.
_SECRET_NAME = re.compile(
    r"(?:^|_)(?:TOKENS?|KEYS?)(?:_|$)|APIKEY|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE
)
# scheme://user:password@host or scheme://token@host: the credentials part.
_URL_CREDENTIALS = re.compile(r"\b([a-z][a-z0-9+.-]*://)([^/\s:@]+(?::[^/\s@]*)?)@")


def mask(text: str, *, env: Mapping[str, str] | None = None, home: bool = False) -> str:
    """`text` with secrets replaced by ***; with `home`, the user's home folder becomes ~."""
    text = _URL_CREDENTIALS.sub(lambda m: f"{m[1]}{MASK}@", text)
    text = _AUTH_HEADER.sub(lambda m: f"{m[1]}{MASK}", text)
    text = _QUOTED.sub(lambda m: f"{m[1]}'{MASK}'", text)
    text = _NAMED.sub(lambda m: f"{m[1]}{m[2]}{MASK}", text)
    text = _LOGIN.sub(lambda m: f"{m[1]}{MASK}", text)
    text = _FLAG.sub(lambda m: f"{m[1]}{MASK}", text)
    text = _TOKENS.sub(MASK, text)
    return _mask_home(text, env) if home else text


def _mask_home(text: str, env: Mapping[str, str] | None) -> str:
    """The home folder as ~: HOME as given and its real path (HOME is often a symlink on
    clusters), then any /home/NAME or /Users/NAME, a NAME with spaces included (R4)."""
    given = (env or {}).get("HOME") or ""
    homes = {given.rstrip("/")} if given and given != "/" else set()
    if given:
        with contextlib.suppress(OSError, RuntimeError, ValueError):
            real = os.path.realpath(given)
            if real != "/":
                homes.add(real.rstrip("/"))
    for path in sorted(homes, key=len, reverse=True):
        text = re.sub(re.escape(path) + r"(?![^/\s'\"])", "~", text)
    return re.sub(r"/(?:home|Users)/[^/\n'\"]*?(?=/|$|[\s'\"](?![^/\n]*/))", "~", text, flags=re.MULTILINE)


def is_secret_name(name: str) -> bool:
    """Whether a variable of this name holds a credential, so that its value is never read."""
    return _SECRET_NAME.search(name) is not None


_USERINFO = re.compile(r"\b([a-z][a-z0-9+.-]*://)[^/\s@\"']+@")


def without_credentials(text: str) -> str:
    """R3: a lock is meant for a repository, so a wheel source's `user:password@` never goes into
    it (as uv keeps them out of uv.lock); an install from the lock gets them from ~/.netrc."""
    return _USERINFO.sub(r"\1", text)
