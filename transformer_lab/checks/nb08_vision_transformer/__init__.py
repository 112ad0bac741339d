"""Checks of notebook 08: patchify, the patch embedding as a convolution, the ViT's input and
2-D positions, and attention rollout.
"""
