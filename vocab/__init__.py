"""The vocabularies shipped with fastenc (installed as ``fastenc._vocab``): gpt2/ and urls/.

Each folder holds a HF ``tokenizer.json`` and the README/script that says how it was made.
"""
