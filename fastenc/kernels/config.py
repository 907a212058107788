"""Indices into ``Vocab.config`` (an int64 array, so that a Vocab is arrays only) and the
codes stored there. Plain integer constants: Numba freezes them, which is what we want."""

MERGE_RULE = 0  # MERGE_RULE_HF or MERGE_RULE_TIKTOKEN
WHOLE_PIECE_LOOKUP = 1  # 1: a piece that is itself a token is emitted without merging
PRETOKENIZER = 2  # PRETOK_GPT2 or PRETOK_URL
VOCAB_SIZE = 3
LENGTH = 4

MERGE_RULE_HF = 0
MERGE_RULE_TIKTOKEN = 1

PRETOK_GPT2 = 1
PRETOK_URL = 2
