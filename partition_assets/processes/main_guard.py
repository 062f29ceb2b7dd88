"""Refuses a command that starts backfill workers when a script calls it outside
`if __name__ == "__main__":`.

The workers are started as Python's multiprocessing starts processes from a fork server: each
imports the caller's main script again (as `__mp_main__`) before it runs anything. A script
calling `run_backfill` at its top level would then start a backfill in each worker, which
multiprocessing refuses with a RuntimeError, and the caller saw only "BrokenProcessPool" per
node. The call site is checked here instead, before anything is recorded or run: the main
module's top-level frame on the stack must be inside its `if __name__ == "__main__":` block.

Not guaranteed: a main module that workers do not import again (no source file: python -c, an
interactive session; a package's `__main__`, as `python -m dagster` runs) or none of whose
frames is on the stack (a call from a thread) is not checked.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from partition_assets.errors import UnguardedScriptError


def refuse_unguarded_script(command: str) -> None:
    """Raises UnguardedScriptError when the main script calls `command` (its name, for the
    message) from its top level outside `if __name__ == "__main__":`."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    name = getattr(getattr(main, "__spec__", None), "name", "")
    # Not imported again by workers: no source file, or a package's __main__ (`python -m
    # dagster`), which multiprocessing leaves alone.
    if main is None or path is None or not Path(path).is_file() or name.endswith("__main__"):
        return
    frame = sys._getframe(1)
    while frame is not None and not (frame.f_globals is main.__dict__ and frame.f_code.co_name == "<module>"):
        frame = frame.f_back  # type: ignore[assignment]
    if frame is None or _inside_main_guard(Path(path), frame.f_lineno):
        return
    raise UnguardedScriptError(
        f'{command} is called at line {frame.f_lineno} of {path}, outside `if __name__ == "__main__":`: '
        "the backfill's worker processes import your script again, as Python's multiprocessing does, and "
        'would each run it. Put the calls under `if __name__ == "__main__":`. Nothing was recorded or run.'
    )


def _inside_main_guard(path: Path, line: int) -> bool:
    """Whether `line` of the script at `path` is inside a top-level `if __name__ == "__main__":`."""
    try:
        tree = ast.parse(path.read_text(), str(path))
    except (OSError, SyntaxError, ValueError):  # not Python source we can read: leave it to multiprocessing
        return True
    return any(
        isinstance(node, ast.If) and _is_main_test(node.test) and node.lineno <= line <= (node.end_lineno or line)
        for node in tree.body
    )


def _is_main_test(test: ast.expr) -> bool:
    """`__name__ == "__main__"`, either way round."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    names = [side.id for side in sides if isinstance(side, ast.Name)]
    values = [side.value for side in sides if isinstance(side, ast.Constant)]
    return names == ["__name__"] and values == ["__main__"]
