"""The wall-clock lint: asset logic that reads the clock instead of its partition.

A re-run reproduces a partition only when the asset computes from the partition
(`context.partition_key`, `context.partition_time_window`, `partition_key_range`), never
from the time it happens to run. This module reads the source of each asset's function
and of the functions of the same module it calls (transitively), and reports every use of
the wall clock:

- Python: `datetime.now/utcnow/today`, `date.today`, `time.time/time_ns`,
  `pendulum.now/today`, `pandas.Timestamp.now/utcnow/today`, under any import alias
  (`import datetime as dt`, `from datetime import datetime`, `from time import time`);
- Spark: `current_date`, `current_timestamp`, `now`, `localtimestamp`, `curdate` of
  `pyspark.sql.functions` (any alias), and the same words (`now` as `now(`) inside SQL text
  passed to `sql`, `expr`, `selectExpr`, `where` or `filter`: string literals, f-string and
  `+` parts, and names bound to such strings in the function or at module level.

A name is resolved through the imports of its module and function, so a local function or
argument named `now` is not a finding, and `dt.datetime.now()` is.

Entry points: `lint_module` (imports the module: the assets of its Definitions objects and
its module-level asset definitions), `lint_file` (never imports: functions decorated with
dagster's `asset`, `multi_asset`, `graph_asset`, `graph_multi_asset`), `lint_assets`, and
`check_wall_clock(defs)`, the opt-in check where Definitions load.

Not guaranteed: the check is static. A clock read through a function of another module,
a method of an object, `getattr`, or SQL text assembled at run time from values the source
does not hold is not found. Code under the decorators (partitions definitions, metadata)
is not asset logic and is not read. A call in a branch that never runs is still reported.
"""

from __future__ import annotations

import ast
import inspect
import os
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg

from partition_assets.code_location import import_module_named
from partition_assets.errors import CodeLocationError, WallClockError

FIX = (
    "wall clock in asset logic; use context.partition_key / context.partition_time_window "
    "(or partition_key_range) instead"
)

_SPARK_CLOCK_FUNCTIONS = ("current_date", "current_timestamp", "now", "localtimestamp", "curdate")
# Fully qualified names: what each use resolves to through its module's imports.
WALL_CLOCK_FUNCTIONS = frozenset(
    {
        "datetime.datetime.now",
        "datetime.datetime.utcnow",
        "datetime.datetime.today",
        "datetime.date.today",
        "time.time",
        "time.time_ns",
        "pendulum.now",
        "pendulum.today",
        "pandas.Timestamp.now",
        "pandas.Timestamp.utcnow",
        "pandas.Timestamp.today",
        *(f"pyspark.sql.functions.{name}" for name in _SPARK_CLOCK_FUNCTIONS),
    }
)
# Calls (by their last name) whose string arguments are SQL that Spark evaluates.
SQL_TAKING_CALLS = frozenset({"sql", "expr", "selectExpr", "where", "filter"})
_SQL_WALL_CLOCK = re.compile(r"\b(?:current_date|current_timestamp|localtimestamp|curdate)\b|\bnow\s*\(", re.I)
_ASSET_DECORATORS = frozenset({"asset", "multi_asset", "graph_asset", "graph_multi_asset"})

_Function = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass(frozen=True, order=True)
class WallClockFinding:
    """One use of the wall clock: the file and line, the call as written, the asset that runs it,
    and `helpers`, the chain of same-module functions from the asset to the one holding the call
    (empty when the call is in the asset's own body)."""

    file: str
    line: int
    call: str
    asset: str
    helpers: tuple[str, ...] = ()

    def __str__(self) -> str:
        where = f"asset {self.asset}"
        if self.helpers:
            *via, helper = self.helpers
            where = f"helper {helper}, called by asset {self.asset}" + (f" via {' -> '.join(via)}" if via else "")
        return f"{_display_path(self.file)}:{self.line}: {self.call} in {where}: {FIX}"


@dataclass(frozen=True)
class WallClockReport:
    """What a lint read (`assets`: names of the assets whose source it checked) and found."""

    assets: tuple[str, ...]
    findings: tuple[WallClockFinding, ...]


def lint_file(path: str | Path) -> WallClockReport:
    """The assets of a Python file, read without importing it: every function decorated with
    dagster's asset decorators, named by the decorator's `name=` or else the function's name.
    A missing or unparsable file is a CodeLocationError.

    Raises:
        CodeLocationError: `path` is no file, or not valid Python; nothing was checked.
    """
    source = _SourceFile.read(Path(path))
    return _report((name, source.check(function, name)) for function, name in source.decorated_assets())


def lint_module(name: str) -> WallClockReport:
    """The assets of module `name`, imported: those of its Definitions objects and its
    module-level asset definitions (as `dg.load_assets_from_modules` finds them). A module
    not on the import path is a CodeLocationError; its own import errors a CodeImportError.

    Raises:
        CodeLocationError: No module `name` is on the import path, or an asset's source file
            cannot be read or parsed.
        CodeImportError: The module's own code raised while it was imported.
    """
    module = import_module_named(name)
    assets: list[object] = list(dg.load_assets_from_modules([module]))
    for value in vars(module).values():
        if isinstance(value, dg.Definitions):
            assets.extend(value.assets or [])
    return lint_assets(assets)


def lint_assets(assets: Iterable[object]) -> WallClockReport:
    """The compute functions of `assets` (AssetsDefinitions, op- or graph-backed). Asset specs,
    source assets and functions without Python source run no code to check and are skipped.
    An asset is named by its key, a multi-asset by its op.

    Raises:
        CodeLocationError: An asset's source file cannot be read or parsed (e.g. it changed
            since it was imported).
    """
    files: dict[str, _SourceFile] = {}
    checked: list[tuple[str, set[WallClockFinding]]] = []
    for function, name, via in _compute_functions(assets):
        path = inspect.getsourcefile(function)
        if path is None:
            continue
        source = files.get(path) or files.setdefault(path, _SourceFile.read(Path(path)))
        node = source.function_at(function.__name__, function.__code__.co_firstlineno)
        if node is not None:
            checked.append((name, source.check(node, name, via)))
    return _report(checked)


def check_wall_clock(defs: dg.Definitions) -> dg.Definitions:
    """Opt in to the wall-clock lint where the Definitions load, in one call:

        defs = check_wall_clock(dg.Definitions(assets=[...], resources={...}))

    Returns `defs` itself when no asset reads the wall clock. Otherwise raises WallClockError
    (its `findings` hold each use, its message lists them), so the code location does not
    load — in the webserver, the daemon and every CLI — until the assets take their time from
    the partition. Costs one parse of each source file that holds an asset.

    Raises:
        WallClockError: An asset reads the wall clock; `findings` holds each use.
        CodeLocationError: An asset's source file cannot be read or parsed.
    """
    findings = lint_assets(defs.assets or []).findings
    if findings:
        listing = "\n".join(f"  {finding}" for finding in findings)
        raise WallClockError(
            f"{len(findings)} wall-clock read(s) in asset logic; a re-run of a partition would not reproduce "
            f"its output:\n{listing}\nTake times from the partition (context.partition_key, "
            "context.partition_time_window); the Definitions were not loaded.",
            findings,
        )
    return defs


def _report(checked: Iterable[tuple[str, set[WallClockFinding]]]) -> WallClockReport:
    names: set[str] = set()
    findings: set[WallClockFinding] = set()
    for name, found in checked:
        names.add(name)
        findings |= found
    return WallClockReport(tuple(sorted(names)), tuple(sorted(findings)))


def _compute_functions(assets: Iterable[object]) -> Iterator[tuple[Callable[..., object], str, tuple[str, ...]]]:
    """(function, asset name, helpers) for each op of each executable asset definition; the op of
    a graph-backed asset is a helper its graph calls, as `lint_file` reads it."""
    for item in assets:
        if not isinstance(item, dg.AssetsDefinition) or not item.is_executable:
            continue
        node = item.node_def
        keys = list(item.keys)
        name = keys[0].to_user_string() if len(keys) == 1 else node.name
        for op in node.iterate_op_defs():  # the op itself, or each op of a graph-backed asset
            # A decorated op keeps the user's function as `decorated_fn`; a plain one is the function.
            function = getattr(op.compute_fn, "decorated_fn", op.compute_fn)
            if inspect.isfunction(function):
                yield function, name, (function.__name__,) if isinstance(node, dg.GraphDefinition) else ()


def _display_path(path: str) -> str:
    """`path` relative to the working directory when it is below it."""
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


def _dotted(node: ast.expr) -> list[str] | None:
    """`a.b.c` as ["a", "b", "c"]; None for anything but a chain of names."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return None if head is None else [*head, node.attr]
    return None


def _import_bindings(node: ast.Import | ast.ImportFrom) -> Iterator[tuple[str, str]]:
    """(local name, the dotted name it refers to) for each name an import statement binds."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.asname:
                yield alias.asname, alias.name
            else:  # `import a.b` binds `a`
                top = alias.name.split(".")[0]
                yield top, top
        return
    # A relative import keeps its dots, so it never resolves to a library's name.
    module = "." * node.level + (node.module or "")
    for alias in node.names:
        yield alias.asname or alias.name, f"{module}.{alias.name}"


def _module_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements that run at module level, through if/try/with blocks, in order."""
    for statement in body:
        yield statement
        if isinstance(statement, ast.If | ast.With | ast.For | ast.While):
            yield from _module_statements(statement.body)
            yield from _module_statements(getattr(statement, "orelse", []))
        elif isinstance(statement, ast.Try):
            for block in (statement.body, *(h.body for h in statement.handlers), statement.orelse, statement.finalbody):
                yield from _module_statements(block)


def _first_line(function: _Function) -> int:
    """The line Python records as the function's first (its first decorator's, if any)."""
    return min([function.lineno, *(decorator.lineno for decorator in function.decorator_list)])


def _walk_body(function: _Function) -> Iterator[ast.AST]:
    """Every node of the function's body (not its decorators, defaults or annotations: they run
    when the asset is defined, not when it computes)."""
    for statement in function.body:
        yield from ast.walk(statement)


@dataclass
class _Scope:
    """The names one function binds: its imports (to a dotted name), everything else it binds
    (arguments, assignments, nested functions), and the strings assigned to names."""

    imports: dict[str, str] = field(default_factory=dict)
    bound: set[str] = field(default_factory=set)
    strings: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def of(cls, function: _Function) -> _Scope:
        scope = cls()
        scope.bound.update(arg.arg for arg in ast.walk(function.args) if isinstance(arg, ast.arg))
        for node in _walk_body(function):
            if isinstance(node, ast.Import | ast.ImportFrom):
                scope.imports.update(_import_bindings(node))
            elif isinstance(node, ast.arg):
                scope.bound.add(node.arg)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                scope.bound.add(node.id)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                scope.bound.add(node.name)
            elif isinstance(node, ast.ExceptHandler) and node.name:
                scope.bound.add(node.name)
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        scope.strings.setdefault(target.id, []).extend(_literal_strings(node.value))
        scope.bound -= scope.imports.keys()
        return scope


def _literal_strings(node: ast.expr) -> list[str]:
    """The literal text of a string expression: a constant, the constant parts of an f-string,
    both sides of `+`, the template of `%` or `.format()`."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        return [part.value for part in node.values if isinstance(part, ast.Constant) and isinstance(part.value, str)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _literal_strings(node.left) + _literal_strings(node.right)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        return _literal_strings(node.left)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
        return _literal_strings(node.func.value)
    return []


class _SourceFile:
    """One parsed Python file: what its module-level names refer to, its module-level
    functions (the helpers an asset can call) and its module-level string constants."""

    def __init__(self, path: Path, tree: ast.Module) -> None:
        self.path = str(path.resolve())
        self.tree = tree
        # name -> the dotted name it imports; None for a name bound otherwise (def, class, assignment).
        self.names: dict[str, str | None] = {}
        self.functions: dict[str, _Function] = {}
        self.strings: dict[str, list[str]] = {}
        for statement in _module_statements(tree.body):
            if isinstance(statement, ast.Import | ast.ImportFrom):
                self.names.update(_import_bindings(statement))
            elif isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef):
                self.names[statement.name] = None
                self.functions[statement.name] = statement
            elif isinstance(statement, ast.ClassDef):
                self.names[statement.name] = None
            elif isinstance(statement, ast.Assign | ast.AnnAssign):
                targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
                for target in targets:
                    if isinstance(target, ast.Name):
                        self.names[target.id] = None
                        if statement.value is not None:
                            self.strings[target.id] = _literal_strings(statement.value)
        self._functions_by_start = {
            (node.name, _first_line(node)): node
            for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        }

    @classmethod
    def read(cls, path: Path) -> _SourceFile:
        try:
            text = path.read_text()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise CodeLocationError(
                f"{path}: no such file: check -f (a Python file defining assets); nothing was checked"
            ) from None
        try:
            return cls(path, ast.parse(text, filename=str(path)))
        except SyntaxError as error:
            raise CodeLocationError(
                f"{path} is not valid Python (line {error.lineno}: {error.msg}): fix it; nothing was checked"
            ) from None

    def function_at(self, name: str, first_line: int) -> _Function | None:
        """The definition of function `name` whose first line (decorators included) is `first_line`."""
        return self._functions_by_start.get((name, first_line))

    def decorated_assets(self) -> Iterator[tuple[_Function, str]]:
        """(function, asset name) for each function decorated with one of dagster's asset decorators."""
        for node in ast.walk(self.tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for decorator in node.decorator_list:
                call = decorator if isinstance(decorator, ast.Call) else None
                target = self._qualified(_dotted(call.func if call else decorator), _Scope())
                if target and target.split(".")[0] == "dagster" and target.split(".")[-1] in _ASSET_DECORATORS:
                    names = [
                        k.value.value
                        for k in (call.keywords if call else [])
                        if k.arg == "name" and isinstance(k.value, ast.Constant)
                    ]
                    yield node, names[0] if names and isinstance(names[0], str) else node.name

    def check(self, asset_function: _Function, asset: str, via: tuple[str, ...] = ()) -> set[WallClockFinding]:
        """Findings in `asset_function`'s body and in every module-level function it reaches;
        `via` names the helpers that lead from the asset to `asset_function`."""
        findings: set[WallClockFinding] = set()
        pending: list[tuple[_Function, tuple[str, ...]]] = [(asset_function, via)]
        seen = {id(asset_function)}
        while pending:
            function, helpers = pending.pop()
            scope = _Scope.of(function)
            called = {id(node.func) for node in _walk_body(function) if isinstance(node, ast.Call)}
            for node in _walk_body(function):
                if isinstance(node, ast.Name | ast.Attribute) and isinstance(node.ctx, ast.Load):
                    parts = _dotted(node)
                    if parts and self._qualified(parts, scope) in WALL_CLOCK_FUNCTIONS:
                        written = ".".join(parts) + ("()" if id(node) in called else "")
                        findings.add(WallClockFinding(self.path, _line(node), written, asset, helpers))
                    helper = self._helper(node, scope)
                    if helper is not None and id(helper) not in seen:
                        seen.add(id(helper))
                        pending.append((helper, (*helpers, helper.name)))
                if isinstance(node, ast.Call):
                    findings.update(
                        WallClockFinding(self.path, _line(node.func), written, asset, helpers)
                        for written in self._sql_clock_calls(node, scope)
                    )
        return findings

    def _qualified(self, parts: list[str] | None, scope: _Scope) -> str | None:
        """The dotted name a chain refers to through the imports; None when its head is not an import."""
        if not parts:
            return None
        head, *rest = parts
        if head in scope.imports:
            base: str | None = scope.imports[head]
        elif head in scope.bound:
            return None
        else:
            base = self.names.get(head)
        return None if base is None else ".".join([base, *rest])

    def _helper(self, node: ast.Name | ast.Attribute, scope: _Scope) -> _Function | None:
        """The module-level function a bare name refers to (called or passed on), if any."""
        if not isinstance(node, ast.Name) or node.id in scope.bound or node.id in scope.imports:
            return None
        return self.functions.get(node.id) if self.names.get(node.id, "") is None else None

    def _sql_clock_calls(self, call: ast.Call, scope: _Scope) -> Iterator[str]:
        """`callee("...word...")` for each clock word in SQL text passed to a SQL-taking call."""
        callee = _dotted(call.func)
        name = callee[-1] if callee else (call.func.attr if isinstance(call.func, ast.Attribute) else None)
        if name not in SQL_TAKING_CALLS:
            return
        written = ".".join(callee) if callee else f".{name}"
        for argument in [*call.args, *(keyword.value for keyword in call.keywords)]:
            for text in self._strings(argument, scope):
                for match in _SQL_WALL_CLOCK.finditer(text):
                    word = "now()" if match.group().lower().startswith("now") else match.group().lower()
                    yield f'{written}("...{word}...")'

    def _strings(self, node: ast.expr, scope: _Scope) -> list[str]:
        """The literal text an argument holds, following a name to the strings bound to it."""
        if isinstance(node, ast.Name):
            if node.id in scope.bound:
                return scope.strings.get(node.id, [])
            return self.strings.get(node.id, [])
        return _literal_strings(node)


def _line(node: ast.expr) -> int:
    # The last line of `a.b.c`: in a call chain over several lines, the line naming the call.
    return node.end_lineno or node.lineno
