"""The fully asynchronous RL loop: rollout workers, the group buffer, staleness control, weight
pushes and the trainer, joined by a controller. Only `bureau.loop.actors` imports Ray."""
