"""CuQA generation: Algorithm 1 of the Self-DC paper (easy items) and the hard-item merge."""
