"""Checks of notebook 01: softmax, scaled dot-product attention, self-attention and its cost."""
