"""Errors' neighbours at the bottom: exact numbers, the fixed-point lattice, the grammar."""
