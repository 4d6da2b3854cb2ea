"""verl-setup: detect a GPU host, select an evidence-backed verl stack, install it with uv."""

__version__ = "0.1.0"
