"""`verl-setup doctor`: the silent traps of a verl setup as checks with evidence and remedies."""
