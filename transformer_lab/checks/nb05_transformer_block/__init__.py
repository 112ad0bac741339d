"""Checks of notebook 05: layer norm, the MLP, encoder and decoder blocks, and counting parameters."""
