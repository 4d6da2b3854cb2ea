"""The compatibility matrix: loading and validating matrices/, CUDA rules, and row selection."""
