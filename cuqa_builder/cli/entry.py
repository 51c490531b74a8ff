"""The console scripts' entry points, light on purpose: each catches Ctrl-C before it imports its
command, so an interrupt while pydantic, openai and spaCy load (a second or more on a busy
machine) ends as one later does: one line and exit status 130, not a traceback.

Only the console scripts import this module, and loading it starts a command: until the entry
point is inside its `try`, Ctrl-C is noted instead of raised (raised, it would surface where
nothing catches it: at the entry point's own first line), then answered there (so a tool or
test that imports this module without calling an entry point has Ctrl-C noted, not raised:
import the command modules instead). Nothing is
imported but what the interpreter loaded with itself: what runs before this module is a window
in which Ctrl-C prints a traceback (`cuqa_builder/__init__.py` and `cli/__init__.py` import
nothing either). `shell.run_command` takes over once the command's module is loaded.
"""

import _signal  # the interpreter's own; `signal` would import `enum` first

from cuqa_builder.cli import say_interrupted

_CTRL_C: list[int] = []  # Ctrl-C noted before an entry point could answer it
# A command started with Ctrl-C ignored (by a shell, for a background job) keeps ignoring it.
_NOTING = _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler
if _NOTING:
    _signal.signal(_signal.SIGINT, lambda signum, frame: _CTRL_C.append(signum))


def _answer_ctrl_c() -> None:
    """Ctrl-C raises KeyboardInterrupt again, and one that came before does now."""
    if _NOTING:
        _signal.signal(_signal.SIGINT, _signal.default_int_handler)
    if _CTRL_C:
        raise KeyboardInterrupt


def _enter(prog: str, module: str) -> int:
    try:
        _answer_ctrl_c()
        return __import__(module, fromlist=["main"]).main()  # no `importlib` to load first
    except KeyboardInterrupt:  # before `run_command` handles it: while importing or parsing
        return say_interrupted(prog)


def build() -> int:
    return _enter("cuqa-build", "cuqa_builder.cli.build")


def evaluate() -> int:
    return _enter("cuqa-eval", "cuqa_builder.cli.evaluate")


def annotate() -> int:
    return _enter("cuqa-annotate", "cuqa_builder.cli.annotate")


def models() -> int:
    return _enter("cuqa-models", "cuqa_builder.cli.models")
