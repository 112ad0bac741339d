"""Checks of notebook 00: byte-pair encoding (count, merge, train, encode, decode) and the
one-hot embedding.
"""
