"""fastenc: exact, fast Numba encoders for language-model training data.

Public names (imported lazily, so ``import fastenc`` is cheap until a kernel is needed):

- ``load(name_or_path) -> Encoder``: ``"gpt2"``, ``"urls"`` or a path to a ``tokenizer.json``.
- ``Encoder``: ``encode``, ``encode_batch``, ``decode``, ``decode_bytes``; ``.vocab`` holds the
  flat numpy tables that the ``@njit`` kernels in ``fastenc.kernels`` take as arguments.
- ``canonical(url) -> str``: the URL card's host-label reversal (an involution); the module
  that holds it is ``fastenc.url_canonical``, so ``fastenc.canonical`` is always the function.
"""
__version__ = "0.1.0"
__all__ = ["load", "Encoder", "canonical", "__version__"]


def __getattr__(name):
    if name in ("load", "Encoder"):
        from fastenc import encoder

        return getattr(encoder, name)
    if name == "canonical":
        from fastenc.url_canonical import canonical

        return canonical
    raise AttributeError(f"module 'fastenc' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
