"""Parity checks: the same numbers from two implementations (benchmarks/__init__.py)."""
