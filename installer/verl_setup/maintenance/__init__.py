"""Keeping the matrix true: prove rows, check them against the index, propose new ones."""
