"""Our product's timed and quality runs (benchmarks/__init__.py)."""
