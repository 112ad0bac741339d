"""Checks of notebook 03: sinusoidal encodings, their shift matrices and offsets, and RoPE."""
