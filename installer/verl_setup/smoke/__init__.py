"""`verl-setup smoke`: verl's own main_ppo, 2 GRPO steps on a tiny local model, in an installed env."""
