"""Training: the trainer, distributed set-up and checkpoint saving."""
