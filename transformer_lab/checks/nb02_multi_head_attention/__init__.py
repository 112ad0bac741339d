"""Checks of notebook 02: splitting and merging heads, multi-head attention, and the same
weights in ``torch.nn.MultiheadAttention``.
"""
