"""Benchmarks: run with `python3 floodgate.py bench <name> [args]`; not part of the test run."""
