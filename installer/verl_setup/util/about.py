"""`verl-setup -V`: the tool's version, the matrix it ships (digest and newest proof date), its uv.

Read without YAML or a subprocess, so `-V` costs about what `--help` does."""

from __future__ import annotations

import hashlib
import re

from verl_setup import __version__
from verl_setup.util.paths import data_dir

_PROOF_DATE = re.compile(rb"^\s*date: '?(\d{4}-\d\d-\d\d)'?$", re.MULTILINE)


def matrix_digest() -> tuple[str, str]:
    """matrices/verl.yaml's sha256 (12 hex, as the locks print a row's) and the newest date in
    matrices/proof.yaml ("unproven" when it has none)."""
    folder = data_dir("matrices")
    digest = hashlib.sha256((folder / "verl.yaml").read_bytes()).hexdigest()[:12]
    proof = folder / "proof.yaml"
    dates = _PROOF_DATE.findall(proof.read_bytes()) if proof.is_file() else []
    return digest, max(dates).decode() if dates else "unproven"


def version_text() -> str:
    from verl_setup.util.uvbin import bundled_uv  # noqa: PLC0415

    digest, date = matrix_digest()
    return f"verl-setup {__version__} (matrix {digest}, proven to {date}; uv {bundled_uv()})\n"
