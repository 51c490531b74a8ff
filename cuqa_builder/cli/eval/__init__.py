"""The subcommands of `cuqa-eval` (`cli/evaluate.py`), one module each: its flags and its
command."""
