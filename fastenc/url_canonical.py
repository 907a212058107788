"""``canonical(url)``: the URL card's host-label reversal, for Python callers.

Decoding a URL bin yields canonical text (``https://com.example.www/a``); ``canonical`` of
that gives the original URL back, and the xxh3 order/shard keys are computed over the
original. The function is an involution, so the same call goes both ways.

This is plain Python (``str`` methods run in C), meant for decode checks and interactive
use: it does not import Numba. For millions of URLs use the kernel
``fastenc.kernels.canonical.canonical_batch`` over Arrow buffers; both are tested
byte-for-byte against the card's function (``fastenc.reference.canonical_ref``).
"""
from __future__ import annotations

__all__ = ["canonical", "canonical_bytes"]


def _is_dotted_quad(host: str) -> bool:
    labels = host.split(".")
    if len(labels) != 4:
        return False
    for label in labels:
        # isascii() first: str.isdigit() is True for non-ASCII digits such as '٣' or '²'.
        if not (0 < len(label) <= 3 and label.isascii() and label.isdigit() and int(label) < 256):
            return False
    return True


def canonical(url: str) -> str:
    """Reverse the host labels of an ``http://``/``https://`` URL; anything else is returned as is.

    Exactly the URL card's ``canonical()``: case-sensitive scheme match; the authority ends
    at the first ``/``, ``?`` or ``#``; userinfo ends at its last ``@``; a port is an all-ASCII-
    digit suffix after the last ``:``; IPv4 dotted quads and ``[``-bracketed hosts are kept.
    ``canonical(canonical(u)) == u`` for every string ``u``.
    """
    if url.startswith("https://"):
        k = 8
    elif url.startswith("http://"):
        k = 7
    else:
        return url
    cut = len(url)
    for ch in "/?#":
        i = url.find(ch, k, cut)
        if i != -1:
            cut = i
    h0 = url.rfind("@", k, cut) + 1 or k
    h1 = url.rfind(":", h0, cut)
    port = url[h1 + 1 : cut] if h1 != -1 else ""
    if not (port.isascii() and port.isdigit()):  # "" is not a port either
        h1 = cut
    host = url[h0:h1]
    if "." not in host or host.startswith("[") or _is_dotted_quad(host):
        return url
    return url[:h0] + ".".join(reversed(host.split("."))) + url[h1:]


def canonical_bytes(url: bytes) -> bytes:
    """``canonical`` on UTF-8 bytes, byte-for-byte; bytes that are not valid UTF-8 are kept.

    Invalid bytes round-trip through ``surrogateescape`` as U+DC80..U+DCFF, which are none of
    the ASCII characters the function looks at, so they behave as ordinary label content,
    exactly as in the Numba kernel.
    """
    text = url.decode("utf-8", "surrogateescape")
    return canonical(text).encode("utf-8", "surrogateescape")
