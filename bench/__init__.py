"""Benchmarks of visformer against peers (`python -m bench`); figures land in bench/RESULTS.md."""
