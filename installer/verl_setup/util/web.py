"""The one HTTP client of the tool's own requests: index pages, wheel-source manifests and wheels,
and bundle downloads. It trusts what uv trusts and never prints a credential:

- certificates: the system store (truststore, as uv's native TLS), plus SSL_CERT_FILE,
  SSL_CERT_DIR, REQUESTS_CA_BUNDLE and CURL_CA_BUNDLE when set;
- credentials: `user:password@` in the URL (sent as basic auth, never as part of a host name),
  else the host's entry in ~/.netrc (or $NETRC); both only to the host they belong to;
- proxies: http_proxy, https_proxy and no_proxy, as urllib reads them;
- every request has an overall deadline (a server that drips its headers or body byte by byte
  is cut off at it, not only one that falls silent), redirects are followed by hand (at most
  10, the final URL kept so relative links join it), and a redirect to plain HTTP from HTTPS, or
  to anything but http(s), is refused.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import netrc
import os
import socket
import ssl
import threading
import time
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit, urlunsplit

from verl_setup.util.bounded import one_line
from verl_setup.util.secrets import mask

READ_TIMEOUT_S = 20.0  # one silent socket read
MAX_REDIRECTS = 10
CA_VARIABLES = ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")
ALLOW_HTTP = "VERL_SETUP_ALLOW_HTTP"
LOOPBACK = ("localhost", "::1")


class WebError(OSError):
    """A request that failed; its message names the URL without credentials, in one line."""


class NotFoundError(WebError):
    """HTTP 404 (or 410): the server has no such page."""


class DeadlineError(WebError, TimeoutError):
    """The overall deadline passed before the whole answer arrived."""


class CertificateError(WebError):
    """The server's certificate is not trusted by the stores this client reads."""


def shown(url: str) -> str:
    """A URL as printed: credentials masked, one line."""
    return one_line(mask(url), 200)


def strip_credentials(url: str) -> str:
    """The URL without its `user:password@` part."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


@dataclass(frozen=True, kw_only=True)
class HttpAnswer:
    """A 200 answer: the final URL (after redirects, credentials stripped) and its body's blocks."""

    url: str
    blocks: Iterator[bytes]
    length: int | None


def ssl_context(env: Mapping[str, str]) -> ssl.SSLContext:
    """The system trust store plus every CA file or folder the environment names."""
    try:
        import truststore  # noqa: PLC0415  # the OS store, as uv's --native-tls

        context: ssl.SSLContext = truststore.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    except ImportError:  # pragma: no cover  # a dependency; OpenSSL's default paths without it
        context = ssl.create_default_context()
    for name in CA_VARIABLES:
        value = env.get(name)
        if value:
            try:
                context.load_verify_locations(cafile=value)
            except (OSError, ssl.SSLError) as exc:
                raise WebError(
                    f"{name}={one_line(value)}: not a CA bundle ({one_line(str(exc), 120)})"
                ) from exc
    if env.get("SSL_CERT_DIR") and Path(env["SSL_CERT_DIR"]).is_dir():
        context.load_verify_locations(capath=env["SSL_CERT_DIR"])
    return context


def http_allowed(host: str | None, env: Mapping[str, str]) -> bool:
    """Plain HTTP only to this machine (nobody sits on that path), or when the user says so."""
    return host in LOOPBACK or (host or "").startswith("127.") or env.get(ALLOW_HTTP) == "1"


def _netrc_auth(host: str, env: Mapping[str, str]) -> tuple[str, str] | None:
    path = env.get("NETRC") or str(Path(env.get("HOME") or Path.home()) / ".netrc")
    try:
        entry = netrc.netrc(path).authenticators(host)
    except (OSError, netrc.NetrcParseError, UnicodeDecodeError):
        return None
    return (entry[0], entry[2] or "") if entry and entry[0] else None


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def _proxy(scheme: str, host: str, env: Mapping[str, str]) -> str | None:
    value = env.get(f"{scheme}_proxy") or env.get(f"{scheme.upper()}_PROXY")
    no = env.get("no_proxy") or env.get("NO_PROXY")
    bypass = urllib.request.proxy_bypass_environment  # type: ignore[attr-defined]  # untyped, documented
    if not value or (no and bypass(host, {"no": no})):
        return None
    return value if "://" in value else f"http://{value}"


class _Request:
    """One GET over one connection, cut off at `deadline` (time.monotonic) whatever the server does."""

    def __init__(self, url: str, deadline: float, auth: str | None, env: Mapping[str, str]) -> None:
        parts = urlsplit(url)
        self.parts = parts
        host, port = parts.hostname or "", parts.port
        proxy = _proxy(parts.scheme, host, env)
        timeout = max(0.1, min(READ_TIMEOUT_S, deadline - time.monotonic()))
        headers = {"User-Agent": "verl-setup", "Accept-Encoding": "identity"}
        if auth:
            headers["Authorization"] = auth
        target = urlunsplit(("", "", parts.path or "/", parts.query, ""))
        conn: http.client.HTTPConnection
        if proxy is None:
            conn = self._connection(parts.scheme, host, port, timeout, env)
        else:
            p = urlsplit(proxy)
            proxy_headers = {}
            if p.username:
                proxy_headers["Proxy-Authorization"] = _basic(unquote(p.username), unquote(p.password or ""))
            if parts.scheme == "https":
                conn = self._connection("https", p.hostname or "", p.port, timeout, env)
                conn.set_tunnel(host, port, headers=proxy_headers)
            else:
                conn = http.client.HTTPConnection(p.hostname or "", p.port, timeout=timeout)
                target = strip_credentials(url).split("#", 1)[0]
                headers.update(proxy_headers)
        self.conn = conn
        self.expired = False
        self.timer = threading.Timer(max(0.0, deadline - time.monotonic()), self._expire)
        self.timer.daemon = True
        self.timer.start()
        try:
            conn.request("GET", target, headers=headers)
            self.response = conn.getresponse()
        except BaseException:
            self.close()
            raise

    @staticmethod
    def _connection(
        scheme: str, host: str, port: int | None, timeout: float, env: Mapping[str, str]
    ) -> http.client.HTTPConnection:
        if scheme == "https":
            return http.client.HTTPSConnection(host, port, timeout=timeout, context=ssl_context(env))
        return http.client.HTTPConnection(host, port, timeout=timeout)

    def _expire(self) -> None:
        self.expired = True
        sock = self.conn.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.timer.cancel()
        self.conn.close()


@contextlib.contextmanager
def get(
    url: str,
    *,
    deadline_s: float,
    env: Mapping[str, str] | None = None,
    allow_http: bool = False,
) -> Iterator[HttpAnswer]:
    """GET `url` (http or https), redirects followed; WebError (NotFoundError, DeadlineError,
    CertificateError) naming the URL without its credentials when there is no 200 answer."""
    env = os.environ if env is None else env
    deadline = time.monotonic() + deadline_s
    origin = urlsplit(url)
    user = (unquote(origin.username or ""), unquote(origin.password or "")) if origin.username else None
    current = strip_credentials(url)
    for _hop in range(MAX_REDIRECTS + 1):
        parts = urlsplit(current)
        if parts.scheme not in ("http", "https"):
            raise WebError(f"{shown(url)}: redirected to {shown(current)}, which is not http(s); refused")
        if parts.scheme == "http" and not (allow_http or http_allowed(parts.hostname, env)):
            raise WebError(
                f"{shown(current)}: plain HTTP (anyone on the path can swap the files); use https, "
                f"or allow it with {ALLOW_HTTP}=1"
            )
        same_origin = (parts.scheme, parts.hostname, parts.port) == (
            origin.scheme,
            origin.hostname,
            origin.port,
        )
        pair = user if user is not None and same_origin else _netrc_auth(parts.hostname or "", env)
        request = _open(current, deadline, _basic(*pair) if pair else None, env)
        status = request.response.status
        if status in (301, 302, 303, 307, 308):
            location = request.response.getheader("Location") or ""
            request.close()
            previous = urlsplit(current)
            current = strip_credentials(urljoin(current, location))
            if previous.scheme == "https" and urlsplit(current).scheme == "http":
                raise WebError(f"{shown(previous.geturl())}: redirected from HTTPS to plain HTTP; refused")
            continue
        if status != 200:
            request.close()
            error = NotFoundError if status in (404, 410) else WebError
            reason = one_line(request.response.reason or "", 60)
            raise error(f"{shown(current)}: HTTP {status} {reason}".rstrip())
        length = request.response.getheader("Content-Length")
        try:
            yield HttpAnswer(
                url=current,
                blocks=_blocks(request, current),
                length=int(length) if length and length.isdigit() else None,
            )
        finally:
            request.close()
        return
    raise WebError(f"{shown(url)}: more than {MAX_REDIRECTS} redirects (a redirect loop?)")


def _open(current: str, deadline: float, auth: str | None, env: Mapping[str, str]) -> _Request:
    try:
        return _Request(current, deadline, auth, env)
    except ssl.SSLCertVerificationError as exc:
        raise CertificateError(
            f"{shown(current)}: certificate not trusted ({one_line(exc.verify_message or str(exc), 120)}); "
            "set SSL_CERT_FILE to the site's CA bundle"
        ) from exc
    except (OSError, http.client.HTTPException, ValueError) as exc:
        if time.monotonic() >= deadline or isinstance(exc, TimeoutError):
            raise DeadlineError(f"{shown(current)}: no answer in time") from exc
        reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        raise WebError(f"{shown(current)}: {one_line(mask(reason), 160)}") from exc


def _blocks(request: _Request, url: str) -> Iterator[bytes]:
    try:
        while block := request.response.read(1 << 20):
            yield block
    except (OSError, http.client.HTTPException) as exc:
        if request.expired or isinstance(exc, TimeoutError):
            raise DeadlineError(f"{shown(url)}: the answer did not arrive in time") from exc
        raise WebError(f"{shown(url)}: {one_line(str(exc), 160)}") from exc
    if request.expired:
        raise DeadlineError(f"{shown(url)}: the answer did not arrive in time")


def read(
    url: str, *, limit: int, deadline_s: float, env: Mapping[str, str] | None = None, allow_http: bool = False
) -> tuple[bytes, str]:
    """At most `limit` bytes at `url`, and the final URL (relative links join that one)."""
    data = bytearray()
    with get(url, deadline_s=deadline_s, env=env, allow_http=allow_http) as answer:
        for block in answer.blocks:
            data += block
            if len(data) >= limit:
                break
        return bytes(data[:limit]), answer.url
