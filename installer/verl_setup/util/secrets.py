"""Mask what must not reach a public issue: tokens, credentials in URLs, and (if asked) home paths."""

from __future__ import annotations

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
    text = _NAMED.sub(lambda m: f"{m[1]}{m[2]}{MASK}", text)
    text = _TOKENS.sub(MASK, text)
    if home:
        homes = {h for h in ((env or {}).get("HOME"),) if h and h != "/"}
        for path in sorted(homes, key=len, reverse=True):
            text = re.sub(re.escape(path.rstrip("/")) + r"(?=/|\b)", "~", text)
        text = re.sub(r"/(?:home|Users)/[^/\s]+", "~", text)
    return text


def is_secret_name(name: str) -> bool:
    """Whether a variable of this name holds a credential, so that its value is never read."""
    return _SECRET_NAME.search(name) is not None
