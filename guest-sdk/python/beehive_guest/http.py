"""Outbound HTTP from a plugin: a small blocking client over wasi:http.

    from beehive_guest import http

    health = http.get("http://127.0.0.1:8080/health")
    if health.is_success():
        ...

    created = (
        http.Request.post("https://api.example.com/v1/things")
        .header("authorization", "Bearer " + (config.get("token") or ""))
        .json({"name": "web"})
        .timeout(2.0)
        .send()
    )

The host sends a request only to a destination the operator's policy grants
(`[http] allow = [...]` in the plugin's `NAME.toml`); anything else raises
`Denied`, and the pass's object gets a Warning event naming the destination.
The operator's timeouts and response size cap always apply; `timeout` can
only shorten them.

Under pytest requests go to the stubs set with `beehive_guest.fake.stub_http`;
a request nothing stubs is denied, as one the policy does not grant.
"""

import json as _json
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, List, Optional, Tuple, Union


class HttpError(Exception):
    """Why a request got no response."""


class Denied(HttpError):
    """The operator's policy does not grant the destination."""

    def __init__(self) -> None:
        super().__init__("the plugin's policy does not grant this destination")


class Timeout(HttpError):
    """Connecting, or waiting for the response, took longer than allowed."""

    def __init__(self, what: str) -> None:
        super().__init__(f"timed out: {what}")


class TooLarge(HttpError):
    """The response body was larger than the operator's cap."""

    def __init__(self, cap: Optional[int]) -> None:
        self.cap = cap
        limit = f"the {cap}-byte cap" if cap is not None else "the cap"
        super().__init__(f"the response is larger than {limit}")


class InvalidUrl(HttpError):
    """The URL is not an absolute http:// or https:// URL."""

    def __init__(self, why: str) -> None:
        super().__init__(f"invalid URL: {why}")


class Failed(HttpError):
    """The request could not be made or its response read."""

    def __init__(self, why: str) -> None:
        super().__init__(f"request failed: {why}")


@dataclass
class Response:
    """A response, read whole. Header names are lower case."""

    status: int
    body: bytes = b""
    headers: List[Tuple[str, str]] = field(default_factory=list)

    def is_success(self) -> bool:
        """Whether the status is 2xx."""
        return 200 <= self.status < 300

    def header(self, name: str) -> Optional[str]:
        """The first value of header `name` (any case)."""
        wanted = name.lower()
        return next((v for n, v in self.headers if n.lower() == wanted), None)

    def text(self) -> str:
        """The body as text (invalid UTF-8 replaced)."""
        return self.body.decode("utf-8", errors="replace")

    def json(self) -> Any:
        """The body decoded from JSON."""
        return _json.loads(self.body)


class Request:
    """A request to send; each setter returns the request, for chaining."""

    def __init__(self, method: str, url: str) -> None:
        self.method = method.upper()
        self.url = url
        self.headers: List[Tuple[str, str]] = []
        self.body_bytes = b""
        self.timeout_seconds: Optional[float] = None

    @classmethod
    def get(cls, url: str) -> "Request":
        """A GET of `url`."""
        return cls("GET", url)

    @classmethod
    def post(cls, url: str) -> "Request":
        """A POST to `url`."""
        return cls("POST", url)

    @classmethod
    def put(cls, url: str) -> "Request":
        """A PUT to `url`."""
        return cls("PUT", url)

    @classmethod
    def delete(cls, url: str) -> "Request":
        """A DELETE of `url`."""
        return cls("DELETE", url)

    def header(self, name: str, value: str) -> "Request":
        """Adds a header."""
        self.headers.append((name, value))
        return self

    def body(self, data: Union[bytes, str]) -> "Request":
        """Sets the body (text is sent as UTF-8)."""
        self.body_bytes = data.encode() if isinstance(data, str) else bytes(data)
        return self

    def json(self, value: Any) -> "Request":
        """Sets a JSON body and its content type."""
        self.header("content-type", "application/json")
        return self.body(_json.dumps(value))

    def timeout(self, limit: Union[float, timedelta]) -> "Request":
        """Shortens every wait (connecting, the first byte, between bytes)
        to `limit` seconds; the operator's limits still apply."""
        seconds = limit.total_seconds() if isinstance(limit, timedelta) else float(limit)
        self.timeout_seconds = seconds
        return self

    def send(self) -> Response:
        """Sends the request and reads the whole response; raises an
        `HttpError` saying why no response came."""
        from . import _host

        if _host.wasm is not None:
            return _host.wasm.http_send(self)
        # Only under pytest: a component cannot import after its snapshot.
        from . import fake

        return fake.send_http(self)


def get(url: str) -> Response:
    """GETs `url`."""
    return Request.get(url).send()


def split_url(url: str) -> Tuple[bool, str, str]:
    """The parts wasi:http wants: https or not, the authority, and the path
    with its query."""
    if url.startswith("https://"):
        https, rest = True, url[len("https://") :]
    elif url.startswith("http://"):
        https, rest = False, url[len("http://") :]
    else:
        raise InvalidUrl(f"{url!r} does not start with http:// or https://")
    end = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    authority, path = rest[:end], rest[end:]
    if not authority or "@" in authority:
        raise InvalidUrl(f"{url!r} needs a host (and no user info)")
    path = path.split("#", 1)[0]
    return https, authority, path or "/"
