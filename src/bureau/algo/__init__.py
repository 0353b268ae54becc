"""RL algorithms as pure functions of tensors: advantages, policy losses, loss reductions.

Nothing here imports Ray, HTTP clients, sandboxes or a model: credit assignment happens on
trajectory records once their group is complete, and the trainer only sees per-token tensors
(`PolicyLossInputs`) and a loss function, so it never knows which algorithm produced them.
"""

from bureau.algo.inputs import LossFn, PolicyLossInputs

__all__ = ["LossFn", "PolicyLossInputs"]
