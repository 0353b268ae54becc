"""bureau: RL post-training of long-horizon knowledge-work agents."""

__version__ = "0.1.0"
