"""Building the wheelhouse: torch extensions compiled once against a row's torch (`wheelhouse build`)."""
