"""Benchmarks: `./dev bench` prints tables, each against a baseline measured in the same run."""
