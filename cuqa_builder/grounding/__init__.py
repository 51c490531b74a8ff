"""Grounding: the known hop checked against Wikipedia articles as they were at the cutoff."""
