"""The vocabularies shipped with fastenc (installed as ``fastenc._vocab``): gpt2/, urls/,
cl100k_base/ and o200k_base/.

gpt2/ and urls/ hold a HF ``tokenizer.json``; cl100k_base/ and o200k_base/ OpenAI's tiktoken rank
files (MIT, via tiktoken). Each folder's README says where its file came from.
"""
