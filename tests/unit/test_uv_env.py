"""What of the user's shell reaches uv: mirrors and credentials do, settings that re-resolve a row don't."""

from __future__ import annotations

from verl_setup.environment.uv import ROW_DECIDES, uv_env


def test_the_users_torch_backend_and_extra_indexes_are_dropped_with_one_warning() -> None:
    said: list[str] = []
    shell = {
        "UV_TORCH_BACKEND": "auto",
        "UV_EXTRA_INDEX_URL": "https://user:secret@mirror.example/torch",
        "UV_PRERELEASE": "allow",
        "UV_INDEX_URL": "https://mirror.example/simple",
        "UV_DEFAULT_INDEX": "https://mirror.example/simple",
        "UV_FIND_LINKS": "/srv/wheels",
        "UV_OFFLINE": "1",
        "SSL_CERT_FILE": "/etc/ca.pem",
    }
    env = uv_env(base=shell, warn=said.append)
    assert not set(ROW_DECIDES) & set(env)
    for kept in ("UV_INDEX_URL", "UV_DEFAULT_INDEX", "UV_FIND_LINKS", "UV_OFFLINE", "SSL_CERT_FILE"):
        assert env[kept] == shell[kept]
    assert env["UV_PYTHON_DOWNLOADS"] == "never"
    assert len(said) == 1
    assert said[0].startswith("warning: not passed to uv, since the row decides what it resolves: ")
    assert all(name in said[0] for name in ("UV_TORCH_BACKEND", "UV_EXTRA_INDEX_URL", "UV_PRERELEASE"))
    assert "secret" not in said[0]
    assert shell["UV_TORCH_BACKEND"] == "auto"  # the caller's mapping is left as it was


def test_a_clean_shell_gets_no_warning() -> None:
    said: list[str] = []
    env = uv_env(base={"PATH": "/usr/bin", "UV_INDEX_URL": "https://mirror.example/simple"}, warn=said.append)
    assert said == []
    assert env == {
        "PATH": "/usr/bin",
        "UV_INDEX_URL": "https://mirror.example/simple",
        "UV_PYTHON_DOWNLOADS": "never",
    }
