"""Noise: the randomness source, exact samplers, mechanisms and private key selection."""
