"""Training integrations: Hugging Face policies, TRL (GRPO ``rollout_func``), server token trajectories,
SFT export and best-of-n search."""
