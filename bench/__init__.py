"""segops benchmarks (run with `python -m bench`); never part of the tests."""
