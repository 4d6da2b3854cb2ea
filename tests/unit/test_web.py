"""The one HTTP client (util/web.py) and the wheel-source reader on it, against a real hostile
PEP 503 index on 127.0.0.1: plain HTTP, and HTTPS with a private CA made here by openssl.
Defects of round 4 (shared/reference/reliability-review-2026-12-c.md): W1, W2, W3, W4, W5, W7, R3."""

from __future__ import annotations

import base64
import hashlib
import http.server
import json
import shutil
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.render_scenarios import SCENARIOS, plan_for
from verl_setup.environment import wheel_pick
from verl_setup.environment.wheel_pick import resolve_wheels
from verl_setup.errors import BadInputError, InstallError
from verl_setup.plan.recipe import build_recipe
from verl_setup.util import web

H200 = next(s for s in SCENARIOS if s.name == "h200-drv580-py312-vllm")  # torch 2.11.0, cp312
WHEEL = "flash_attn-2.8.3+cu12torch2.11cxx11abiTRUE-cp312-cp312-linux_x86_64.whl"
BYTES = b"the wheel's real bytes"
DIGEST = hashlib.sha256(BYTES).hexdigest()
SECRET = "s3cr3tT0kenXYZ"  # noqa: S105  # a marker that must never print

Route = Callable[[http.server.BaseHTTPRequestHandler], None]


def _send(
    handler: http.server.BaseHTTPRequestHandler, status: int, body: bytes = b"", **headers: str
) -> None:
    handler.send_response(status)
    for k, v in headers.items():
        handler.send_header(k.replace("_", "-"), v)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


def _page(href: str) -> bytes:
    return f'<html><body><a href="{href}">{WHEEL}</a></body></html>'.encode()


class Index:
    """A threaded server whose answer per path is a function; records every path asked."""

    def __init__(self, routes: dict[str, Route], context: ssl.SSLContext | None = None) -> None:
        self.asked: list[tuple[str, str | None]] = []
        index = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                index.asked.append((self.path, self.headers.get("Authorization")))
                route = routes.get(self.path)
                if route is None:
                    _send(self, 404)
                else:
                    route(self)

            def log_message(self, *_args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        if context is not None:
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str, scheme: str = "http", userinfo: str = "") -> str:
        return f"{scheme}://{userinfo}127.0.0.1:{self.port}{path}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def serve() -> Iterator[Callable[..., Index]]:
    made: list[Index] = []

    def start(routes: dict[str, Route], context: ssl.SSLContext | None = None) -> Index:
        made.append(Index(routes, context))
        return made[-1]

    yield start
    for index in made:
        index.close()


def _pick(source: str) -> str:
    """What resolve_wheels pins for flash-attn from this one user source: the URL and sha256."""
    plan = plan_for(H200)
    recipe = build_recipe(plan, wheel_sources=(source,))
    fa = recipe.extensions[0]
    user = tuple(c for c in fa.candidates if c.source.startswith("user "))
    import dataclasses  # noqa: PLC0415

    recipe = dataclasses.replace(recipe, extensions=(dataclasses.replace(fa, candidates=user),))
    got = resolve_wheels(plan, recipe, lambda _s: None).flash_attn
    assert got is not None
    return f"{got.url} {got.sha256}"


def _wheel(h: http.server.BaseHTTPRequestHandler) -> None:
    _send(h, 200, BYTES)


def test_w1_a_wheel_whose_bytes_do_not_match_the_index_digest_is_refused_naming_both(
    serve: Callable[..., Index],
) -> None:
    claimed = "0" * 64
    index = serve({
        "/simple/flash-attn/": lambda h: _send(h, 200, _page(f"/files/{WHEEL}#sha256={claimed}")),
        f"/files/{WHEEL}": _wheel,
    })  # fmt: skip
    with pytest.raises(InstallError) as caught:
        _pick(index.url("/simple/"))
    assert f"sha256 {DIGEST}" in str(caught.value)
    assert f"sha256 {claimed}" in str(caught.value)


def test_w1_the_pin_carries_the_digest_of_the_bytes_read_not_the_index_claim(
    serve: Callable[..., Index],
) -> None:
    index = serve({
        "/simple/flash-attn/": lambda h: _send(h, 200, _page(f"/files/{WHEEL}")),
        f"/files/{WHEEL}": _wheel,
    })  # fmt: skip
    assert _pick(index.url("/simple/")) == f"{index.url('/files/' + WHEEL)} {DIGEST}"


def test_w2_relative_links_join_the_url_after_the_redirect(serve: Callable[..., Index]) -> None:
    index = serve({
        "/old/simple/flash-attn/": lambda h: _send(h, 302, Location="/moved/simple/flash-attn/"),
        "/moved/simple/flash-attn/": lambda h: _send(h, 200, _page(f"../../files/{WHEEL}#sha256={DIGEST}")),
        f"/moved/files/{WHEEL}": _wheel,
    })  # fmt: skip
    assert _pick(index.url("/old/simple/")) == f"{index.url('/moved/files/' + WHEEL)} {DIGEST}"


def test_w7_an_index_on_the_web_cannot_point_a_pin_at_a_local_file(
    serve: Callable[..., Index], tmp_path: Path
) -> None:
    local = tmp_path / WHEEL
    local.write_bytes(BYTES)
    index = serve({"/simple/flash-attn/": lambda h: _send(h, 200, _page(local.as_uri()))})
    with pytest.raises(InstallError, match=r"no flash-attn 2\.8\.3 wheel"):
        _pick(index.url("/simple/"))


def test_w7_plain_http_to_another_host_is_refused_unless_allowed() -> None:
    with pytest.raises(web.WebError, match="plain HTTP") as caught:
        web.read("http://example.invalid/simple/", limit=10, deadline_s=5, env={})
    assert "VERL_SETUP_ALLOW_HTTP=1" in str(caught.value)


def test_w5_a_failing_user_source_is_named_not_skipped(serve: Callable[..., Index]) -> None:
    index = serve({"/simple/flash-attn/": lambda h: _send(h, 500)})
    with pytest.raises(BadInputError) as caught:
        _pick(index.url("/simple/"))
    assert str(caught.value).startswith(f"wheel source user {index.url('/simple/')}: unreachable (")
    assert "HTTP 500" in str(caught.value)


def test_w5_a_redirect_loop_is_named(serve: Callable[..., Index]) -> None:
    index = serve({"/simple/flash-attn/": lambda h: _send(h, 302, Location="/simple/flash-attn/")})
    with pytest.raises(BadInputError, match="more than 10 redirects"):
        _pick(index.url("/simple/"))


def test_w3_a_server_that_drips_its_headers_meets_the_deadline(serve: Callable[..., Index]) -> None:
    def drip(h: http.server.BaseHTTPRequestHandler) -> None:
        for ch in b"HTTP/1.0 200 OK\r\nX-Slow: " + b"a" * 100:
            h.wfile.write(bytes([ch]))
            h.wfile.flush()
            time.sleep(0.2)

    index = serve({"/slow": drip})
    started = time.monotonic()
    with pytest.raises(web.DeadlineError, match=r"127\.0\.0\.1.*/slow: no answer in time"):
        web.read(index.url("/slow"), limit=100, deadline_s=1.5, env={})
    assert time.monotonic() - started < 5


def test_w3_a_source_whose_manifests_stall_is_cut_off_as_a_whole(
    serve: Callable[..., Index], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(wheel_pick, "SOURCE_DEADLINE_S", 2.0)
    names = [f"flash_attn-2.8.3-{i}-cp312-cp312-linux_x86_64.whl" for i in range(1, 40)]
    page = "".join(f'<a href="/files/{n}">{n}</a>' for n in names).encode()

    def stall(h: http.server.BaseHTTPRequestHandler) -> None:
        time.sleep(0.5)
        _send(h, 200, b'{"torch": "2.6.0"}')

    routes: dict[str, Route] = {"/simple/flash-attn/": lambda h: _send(h, 200, page)}
    routes.update({f"/files/{n}.json": stall for n in names})
    index = serve(routes)
    started = time.monotonic()
    with pytest.raises(BadInputError, match="in time"):
        _pick(index.url("/simple/"))
    assert time.monotonic() - started < 8


def test_w4_a_deeply_nested_manifest_is_ignored_not_a_crash(serve: Callable[..., Index]) -> None:
    name = "flash_attn-2.8.3-cp312-cp312-linux_x86_64.whl"
    index = serve({
        "/simple/flash-attn/": lambda h: _send(h, 200, f'<a href="/files/{name}">x</a>'.encode()),
        f"/files/{name}.json": lambda h: _send(h, 200, b"[" * 200_000),
        f"/files/{name}": _wheel,
    })  # fmt: skip
    assert _pick(index.url("/simple/")).endswith(DIGEST)


def _basic_auth_routes(asked_auth: str) -> dict[str, Route]:
    def guarded(body: Callable[[http.server.BaseHTTPRequestHandler], None]) -> Route:
        def route(h: http.server.BaseHTTPRequestHandler) -> None:
            if h.headers.get("Authorization") != asked_auth:
                _send(h, 401, WWW_Authenticate='Basic realm="x"')
            else:
                body(h)

        return route

    return {
        "/simple/flash-attn/": guarded(lambda h: _send(h, 200, _page(f"/files/{WHEEL}#sha256={DIGEST}"))),
        f"/files/{WHEEL}": guarded(_wheel),
    }


def test_r3_credentials_in_the_source_url_are_sent_as_basic_auth_and_never_printed(
    serve: Callable[..., Index],
) -> None:
    auth = "Basic " + base64.b64encode(f"alice:{SECRET}".encode()).decode()
    index = serve(_basic_auth_routes(auth))
    source = index.url("/simple/", userinfo=f"alice:{SECRET}@")
    pinned = _pick(source)
    assert pinned.endswith(DIGEST)
    assert [a for _p, a in index.asked] == [auth, auth]
    # the source's name, as plan, errors and --json print it
    plan = plan_for(H200)
    names = [c.source for c in build_recipe(plan, wheel_sources=(source,)).extensions[0].candidates]
    assert not any(SECRET in n for n in names)
    # a failure names the source without the password
    index.close()
    with pytest.raises(BadInputError) as caught:
        _pick(source)
    assert SECRET not in str(caught.value)
    assert "alice" not in str(caught.value) or "***" in str(caught.value)


def test_netrc_credentials_are_used_for_their_host(serve: Callable[..., Index], tmp_path: Path) -> None:
    auth = "Basic " + base64.b64encode(f"bob:{SECRET}".encode()).decode()
    index = serve(_basic_auth_routes(auth))
    netrc = tmp_path / "netrc"
    netrc.write_text(f"machine 127.0.0.1 login bob password {SECRET}\n")
    netrc.chmod(0o600)
    data, _ = web.read(
        index.url("/simple/flash-attn/"), limit=10_000, deadline_s=10, env={"NETRC": str(netrc)}
    )
    assert WHEEL.encode() in data


@pytest.fixture(scope="module")
def private_ca(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ssl.SSLContext]:
    """A CA of our own and a 127.0.0.1 certificate it signed (openssl, as a site's would be)."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    d = tmp_path_factory.mktemp("ca")

    def ossl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)

    ossl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
         "-subj", "/CN=verl-setup test CA")  # fmt: skip
    ossl(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "srv.key",
        "-out",
        "srv.csr",
        "-subj",
        "/CN=127.0.0.1",
    )
    (d / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1\n")
    ossl("x509", "-req", "-in", "srv.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
         "-out", "srv.pem", "-days", "2", "-extfile", "ext.cnf")  # fmt: skip
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(d / "srv.pem", d / "srv.key")
    return d / "ca.pem", context


@pytest.mark.parametrize("variable", ["SSL_CERT_FILE", "REQUESTS_CA_BUNDLE"])
def test_a_private_ca_named_by_the_environment_is_trusted(
    serve: Callable[..., Index], private_ca: tuple[Path, ssl.SSLContext], variable: str
) -> None:
    ca, context = private_ca
    index = serve({"/x": lambda h: _send(h, 200, b"ok")}, context)
    assert web.read(index.url("/x", "https"), limit=10, deadline_s=10, env={variable: str(ca)})[0] == b"ok"
    with pytest.raises(web.CertificateError, match="certificate not trusted"):
        web.read(index.url("/x", "https"), limit=10, deadline_s=10, env={})


def test_w7_https_redirecting_to_plain_http_is_refused(
    serve: Callable[..., Index], private_ca: tuple[Path, ssl.SSLContext]
) -> None:
    ca, context = private_ca
    index = serve({"/x": lambda h: _send(h, 302, Location="http://127.0.0.1:1/x")}, context)
    with pytest.raises(web.WebError, match="from HTTPS to plain HTTP"):
        web.read(index.url("/x", "https"), limit=10, deadline_s=10, env={"SSL_CERT_FILE": str(ca)})


def test_w7_an_https_page_linking_plain_http_does_not_pin_it(
    serve: Callable[..., Index], private_ca: tuple[Path, ssl.SSLContext], monkeypatch: pytest.MonkeyPatch
) -> None:
    ca, context = private_ca
    monkeypatch.setenv("SSL_CERT_FILE", str(ca))
    index = serve(
        {"/simple/flash-attn/": lambda h: _send(h, 200, _page(f"http://127.0.0.1:1/{WHEEL}"))}, context
    )
    with pytest.raises(InstallError, match=r"no flash-attn 2\.8\.3 wheel"):
        _pick(index.url("/simple/", "https"))


def test_credentials_go_only_to_their_own_host(serve: Callable[..., Index]) -> None:
    other = serve({"/y": lambda h: _send(h, 200, b"ok")})
    first = serve({"/x": lambda h: _send(h, 302, Location=f"http://localhost:{other.port}/y")})
    web.read(first.url("/x", userinfo=f"u:{SECRET}@"), limit=10, deadline_s=10, env={})
    assert first.asked[0][1] is not None
    assert other.asked == [("/y", None)]


def test_no_error_message_holds_a_password() -> None:
    with pytest.raises(web.WebError) as caught:
        web.read(f"http://u:{SECRET}@127.0.0.1:9/simple/", limit=10, deadline_s=5, env={})
    assert SECRET not in str(caught.value)
    json.dumps(str(caught.value))


def test_the_maintainers_index_client_trusts_ssl_cert_file_too(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from verl_setup.environment.index import Index  # noqa: PLC0415

    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "ca.pem"))
    assert Index("https://index.example/simple/").session.verify == str(tmp_path / "ca.pem")
