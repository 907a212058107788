"""Slow, obvious pure-Python references of fastenc's kernels, for tests.

Nothing here is used on a hot path; each function is written to be easy to check by eye.
"""
from __future__ import annotations

_HTTP_SCHEMES = ("https://", "http://")
_AUTHORITY_ENDS = "/?#"


def _is_dotted_quad(host: str) -> bool:
    labels = host.split(".")
    return len(labels) == 4 and all(
        0 < len(label) <= 3 and label.isascii() and label.isdigit() and int(label) < 256 for label in labels
    )


def canonical_ref(url: str) -> str:
    """The URL card's canonical(): reverse the host labels of an http(s) URL (an involution).

    Other schemes, IPv4 dotted quads and bracketed IPv6 hosts are returned unchanged. The
    scheme match is case-sensitive and the port must be ASCII digits, exactly as the card's
    function behaves.
    """
    scheme = next((s for s in _HTTP_SCHEMES if url.startswith(s)), None)
    if scheme is None:
        return url
    rest = url[len(scheme):]
    cut = min((i for i in (rest.find(c) for c in _AUTHORITY_ENDS) if i != -1), default=len(rest))
    authority, tail = rest[:cut], rest[cut:]
    userinfo, at, hostport = authority.rpartition("@")
    host, colon, port = hostport.rpartition(":")
    if not colon or not (port.isascii() and port.isdigit()):
        host, colon, port = hostport, "", ""
    if not (host.startswith("[") or _is_dotted_quad(host)):
        host = ".".join(reversed(host.split(".")))
    return f"{scheme}{userinfo}{at}{host}{colon}{port}{tail}"
