"""A user's wheel source as given: a wheelhouse folder (what `wheelhouse build --out DIR` writes
and tells the user to pass) is read through its simple/ index; a flat folder of wheels and an
http(s) URL are taken as they are; anything else is one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from verl_setup.errors import BadInputError
from verl_setup.plan.wheel_sources import user_sources


def test_a_wheelhouse_folder_is_read_through_its_simple_index(tmp_path: Path) -> None:
    (tmp_path / "simple").mkdir()
    (tmp_path / "simple" / "index.html").write_text("<html></html>\n")
    (source,) = user_sources([str(tmp_path)], {})
    assert source.url == (tmp_path / "simple").as_uri() + "/"
    (source,) = user_sources([], {"VERL_SETUP_WHEEL_SOURCES": tmp_path.as_uri()})
    assert source.url == (tmp_path / "simple").as_uri() + "/"


def test_a_flat_folder_and_a_url_are_taken_as_they_are(tmp_path: Path) -> None:
    flat, url = user_sources([str(tmp_path), "https://wheels.example/simple"], {})
    assert (flat.url, url.url) == (tmp_path.as_uri() + "/", "https://wheels.example/simple/")
    with pytest.raises(BadInputError, match="no such folder"):
        user_sources([str(tmp_path / "absent")], {})
