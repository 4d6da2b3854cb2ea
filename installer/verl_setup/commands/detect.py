"""`verl-setup detect`: describe this host, as text or as versioned JSON."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Mapping
from typing import TextIO

from verl_setup.commands.reports import host_text
from verl_setup.host.detect import detect
from verl_setup.output import envelope


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The detect flags."""
    p.add_argument("--json", action="store_true", help="machine-readable HostFacts (a host file for --host)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace, env: Mapping[str, str], out: TextIO) -> int:  # noqa: ARG001  # every command's signature
    """Detect and print."""
    facts = detect()
    out.write(envelope("detect", dataclasses.asdict(facts)) if args.json else host_text(facts))
    return 0
