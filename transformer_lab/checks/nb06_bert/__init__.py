"""Checks of notebook 06: BERT's paired inputs and embeddings, MLM corruption, and its two heads."""
