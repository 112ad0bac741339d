"""Checks of notebook 04: causal and padding masks, future leaks, padding a batch, and cross-attention."""
