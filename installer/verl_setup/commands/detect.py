"""`verl-setup detect`: describe this host, as text or as versioned JSON."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import TextIO

from verl_setup.commands.reports import host_text
from verl_setup.host.detect import detect


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The detect flags."""
    p.add_argument("--json", action="store_true", help="machine-readable HostFacts (schema 1)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace, env: Mapping[str, str], out: TextIO) -> int:  # noqa: ARG001  # every command's signature
    """Detect and print."""
    facts = detect()
    out.write(facts.to_json() if args.json else host_text(facts))
    return 0
