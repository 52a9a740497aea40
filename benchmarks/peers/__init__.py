"""The peer's side of a comparison, and the drivers of both sides (benchmarks/__init__.py)."""
