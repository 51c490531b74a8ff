"""Automatic quality control of generated candidates: format and leakage checks, model probes."""
