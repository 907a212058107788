"""The UTF-8 validity kernel against Python's decoder (issue 10, item 8)."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from budget import examples

from fastenc.kernels.utf8 import count_invalid_utf8


def _flat(docs):
    data = np.frombuffer(b"".join(docs), dtype=np.uint8)
    offsets = np.cumsum([0] + [len(d) for d in docs]).astype(np.int64)
    return data, offsets


def _python_count(docs):
    bad = 0
    for d in docs:
        try:
            d.decode("utf-8")
        except UnicodeDecodeError:
            bad += 1
    return bad


EDGES = [b"", b"abc", "é€😀".encode(), b"\xc0\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe2\x82", b"\xff",
         b"\xf0\x9f\x98", b"\xc2\xa9", b"\xef\xbf\xbf", b"\xf4\x8f\xbf\xbf", b"\x80", b"a\xe0\xa0\x80b"]


def test_edge_cases():
    data, offsets = _flat(EDGES)
    assert count_invalid_utf8(data, offsets) == _python_count(EDGES) == 7


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.one_of(st.binary(max_size=12), st.text(max_size=6).map(lambda t: t.encode("utf-8", "surrogatepass"))), max_size=8))
def test_matches_python(docs):
    data, offsets = _flat(docs)
    assert count_invalid_utf8(data, offsets) == _python_count(docs)
