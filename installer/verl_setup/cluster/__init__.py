"""Every node at once: one Ray task or Slurm step per node (detect, install, verify)."""
