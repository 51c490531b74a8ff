"""What makes an item a compositional *unknown* question, checked one item at a time (SPEC 2.9):
its question with the event masked, its names and answers, its form, and the checker's four
checks. Below both generation (which asks the checks while composing, so that a failing bridge
is replaced) and validation (which records them): neither imports the other.
"""

GUESSES_ASKED = 5  # the guessing prompt asks for five, ranked: `--guesses K` counts the first K
DEFAULT_GUESSES_COUNTED = 3
