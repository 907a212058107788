"""Recipes: parquet in, finished output directory out. Each is idempotent and atomic."""
