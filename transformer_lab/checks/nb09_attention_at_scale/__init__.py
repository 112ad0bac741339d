"""Checks of notebook 09: merging softmax statistics, tiled attention, grouped-query
attention, the KV-cache size and sliding-window masks.
"""
