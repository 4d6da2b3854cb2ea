"""The distribution as os-release(5) states it, read from real files of several distributions."""

from __future__ import annotations

from pathlib import Path

import pytest

from verl_setup.host.system import os_facts

FIXTURES = Path(__file__).parent.parent / "fixtures" / "os-release"


def root_with(tmp_path: Path, text: str, where: str = "etc/os-release") -> Path:
    path = tmp_path / where
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("rocky", ("rocky", "8.4")),
        ("ubuntu16", ("ubuntu", "16.04")),
        ("centos7", ("centos", "7")),
        ("opensuse15", ("opensuse-leap", "15.2")),
        ("sles12", ("sles", "12.1")),
        ("amazon2016", ("amzn", "2016.03")),
        ("fedora30", ("fedora", "30")),
        ("debian10", ("debian", "10")),
        ("debian12", ("debian", "12")),
        ("arch", ("arch", None)),  # a rolling release has no VERSION_ID
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_real_os_release_files(tmp_path: Path, name: str, expected: tuple[str, str | None]) -> None:
    facts = os_facts(root_with(tmp_path, (FIXTURES / name).read_text(encoding="utf-8")))
    assert (facts.distro, facts.distro_version) == expected


def test_only_usr_lib_os_release(tmp_path: Path) -> None:
    # os-release(5): /etc/os-release takes precedence, /usr/lib/os-release is the fallback.
    root = root_with(tmp_path, (FIXTURES / "debian12").read_text(encoding="utf-8"), "usr/lib/os-release")
    facts = os_facts(root)
    assert (facts.distro, facts.distro_version) == ("debian", "12")
    root_with(tmp_path, (FIXTURES / "rocky").read_text(encoding="utf-8"))
    assert os_facts(tmp_path).distro == "rocky"


def test_single_quotes_and_escapes_are_read_as_the_shell_reads_them(tmp_path: Path) -> None:
    # os-release(5): "Variable assignment values must be enclosed in double or single quotes if
    # they include spaces, semicolons or other special characters", with shell escapes.
    root = root_with(tmp_path, '# comment\nID=\'rocky\'\nVERSION_ID="9.\\"4\\""\nNAME="a b\n')
    facts = os_facts(root)
    assert (facts.distro, facts.distro_version) == ("rocky", '9."4"')


def test_no_os_release_at_all(tmp_path: Path) -> None:
    facts = os_facts(tmp_path)
    assert (facts.distro, facts.distro_version) == (None, None)
