"""Fuzzing of ccdiag's trace readers (see fuzz/README.md). Not installed with the package."""
