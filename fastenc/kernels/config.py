"""Indices into ``Vocab.config`` (an int64 array, so that a Vocab is arrays only) and the
codes stored there. Plain integer constants: Numba freezes them, which is what we want."""

MERGE_RULE = 0  # MERGE_RULE_HF or MERGE_RULE_TIKTOKEN
WHOLE_PIECE_LOOKUP = 1  # 1: a piece that is itself a token is emitted without merging
PRETOKENIZER = 2  # PRETOK_GPT2, PRETOK_URL, PRETOK_CL100K, PRETOK_O200K or PRETOK_REGEX
VOCAB_SIZE = 3
RANK_IS_ID = 4  # 1: every merge's rank is its result's id (tiktoken's files), so merge_result is not read
LENGTH = 5

MERGE_RULE_HF = 0
MERGE_RULE_TIKTOKEN = 1

PRETOK_GPT2 = 1
PRETOK_URL = 2
PRETOK_CL100K = 3  # tiktoken's cl100k_base split pattern (kernels/pretok_cl100k.py)
PRETOK_O200K = 4  # tiktoken's o200k_base split pattern (kernels/pretok_o200k.py)
PRETOK_REGEX = 5  # any split pattern, compiled to a program (fastenc.pattern, kernels/pretok_regex.py)
