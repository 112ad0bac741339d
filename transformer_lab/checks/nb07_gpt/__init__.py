"""Checks of notebook 07: next-token batches, the causal LM loss, a GPT from blocks, filtering
logits for sampling, and greedy generation with a KV cache.
"""
