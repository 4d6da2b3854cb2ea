"""The distribution as os-release(5) states it, read from real files of several distributions."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from verl_setup.host.distribution import read_distribution
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


def test_codename_and_like_come_with_the_source_of_each_fact(tmp_path: Path) -> None:
    facts = os_facts(root_with(tmp_path, (FIXTURES / "ubuntu16").read_text(encoding="utf-8")))
    assert (facts.distro, facts.distro_version, facts.codename, facts.like) == (
        "ubuntu",
        "16.04",
        "xenial",
        ("debian",),
    )
    assert facts.source.startswith("distro, distro_version, codename, like: /etc/os-release; ")
    assert "kernel, arch: uname" in facts.source


def test_an_empty_version_codename_says_there_is_none(tmp_path: Path) -> None:
    # os-release(5): a distribution without codenames may set VERSION_CODENAME="" on purpose.
    facts = os_facts(
        root_with(tmp_path, 'ID=fedora\nVERSION_ID=30\nVERSION="30 (Thirty)"\nVERSION_CODENAME=""\n')
    )
    assert (facts.distro, facts.codename) == ("fedora", None)


def test_a_system_without_os_release_is_read_from_its_older_release_file(tmp_path: Path) -> None:
    # CentOS 5 has no os-release: only /etc/centos-release (and redhat-release linking to it).
    root = root_with(
        tmp_path, (FIXTURES / "centos5-centos-release").read_text(encoding="utf-8"), "etc/centos-release"
    )
    release = read_distribution(root)
    assert (release.id, release.version, release.codename) == ("centos", "5.11", "Final")
    assert release.sources == dict.fromkeys(("id", "version", "codename"), "/etc/centos-release")


@pytest.mark.subprocess  # the recorded lsb_release stand-in
def test_lsb_release_fills_in_what_os_release_does_not_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Debian 13 before its release: os-release has no VERSION_ID; lsb_release states one.
    monkeypatch.setenv("PATH", f"{FIXTURES / 'lsb'}{os.pathsep}{os.environ['PATH']}")
    root = root_with(tmp_path, "ID=debian\n")
    release = read_distribution(root, lsb=True)
    assert (release.id, release.version, release.codename) == ("debian", "14.04", "trusty")
    assert release.sources == {
        "id": "/etc/os-release",
        "version": "lsb_release -a",
        "codename": "lsb_release -a",
    }
    assert read_distribution(root).version is None  # a tree under another root: files only


@pytest.mark.subprocess
def test_no_lsb_release_on_path_is_no_fact(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    release = read_distribution(root_with(tmp_path, "ID=debian\n"), lsb=True)
    assert (release.id, release.version, release.sources) == ("debian", None, {"id": "/etc/os-release"})


def test_an_os_release_that_is_not_utf8_is_read_as_far_as_it_goes(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/os-release").write_bytes(b'ID=debian\nNAME="D\xe9bian"\n')  # Latin-1, not UTF-8
    assert read_distribution(tmp_path).id == "debian"
