"""matrix prove records, for a git source, the commit installed and where git served it from when
git's url.insteadOf pointed the row's URL at a local mirror (the Megatron rows' mbridge)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from verl_setup.maintenance.prove import _git_source

URL = "git+https://github.com/ISEEKYAN/mbridge.git@641a5a0"


def installed(prefix: Path, commit: str) -> None:
    """A dist-info as uv writes it for a git install (PEP 610 direct_url.json)."""
    info = prefix / "lib" / "python3.12" / "site-packages" / "mbridge-0.15.1.dist-info"
    info.mkdir(parents=True)
    vcs = {"vcs": "git", "commit_id": commit, "requested_revision": "641a5a0"}
    (info / "direct_url.json").write_text(
        json.dumps({"url": "https://github.com/ISEEKYAN/mbridge.git", "vcs_info": vcs})
    )


@pytest.mark.subprocess  # real git: `git ls-remote --get-url` applies insteadOf without a network
def test_the_commit_and_a_rewritten_url_are_recorded(tmp_path: Path) -> None:
    installed(tmp_path / "env", "3e7fb94b7350d750ae0ba87a2efc44d5c4f83ffb")
    config = tmp_path / "gitconfig"
    config.write_text(
        '[url "file:///srv/mirror/mbridge.git"]\n\tinsteadOf = https://github.com/ISEEKYAN/mbridge.git\n'
    )
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "GIT_CONFIG_GLOBAL": str(config)}
    assert _git_source(tmp_path / "env", "mbridge", URL, env) == {
        "commit": "3e7fb94b7350d750ae0ba87a2efc44d5c4f83ffb",
        "served_from": "file:///srv/mirror/mbridge.git",
    }
    plain = {**env, "GIT_CONFIG_GLOBAL": str(tmp_path / "none")}
    assert _git_source(tmp_path / "env", "mbridge", URL, plain) == {
        "commit": "3e7fb94b7350d750ae0ba87a2efc44d5c4f83ffb"
    }  # fetched from the row's own URL: nothing more to say
    assert _git_source(tmp_path / "env", "megatron-bridge", "megatron-bridge==0.5.0", env) == {}
