"""Container images from the rendered docker target: which builder, BuildKit, the legacy engine."""
