"""The token-in/token-out agent harness.

Messages at the edges, tokens in the middle: the renderer turns the task and the tool results
into token ids by appending only, the engine samples ids, and the record keeps exactly those ids
with their logprobs and weight versions, so that training optimizes the actions taken.
"""
