"""Which code location a backfill loads, and loading it, in every form Dagster loads: a
module or file (optionally `:ATTRIBUTE`) holding a Definitions object, a `@dg.definitions`
function or a `@repository`; a workspace.yaml's entry; a pyproject.toml's `[tool.dagster]`
or `[tool.dg]` project.

`load_definitions` returns a location's Definitions resolved (`resolved`): an error in
them raises there, and every later use reads the result Dagster cached on the object. A
file loaded again unchanged in the same process is not executed again, as a module name is
not imported again (`sys.modules`): one backfill command plans, checks and coordinates
from one load (executing a generated 2,000-asset file takes seconds).

Not guaranteed: a file whose definitions depend on something other than its text (an
environment variable, a module it imports) is not executed again when only that changed,
as with a module name. Beta warning Dagster raises while resolving them is not shown, whatever
definition it is about (Dagster raises one itself, about sensor `owners`: that is why).
"""

import hashlib
import importlib
import importlib.util
import site
import sys
import tomllib
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any, cast

import dagster as dg
import yaml

from partition_assets.dagster_betas import quiet_dagster_betas
from partition_assets.errors import CodeImportError, CodeLocationError


def dagster_config(root: Path) -> dict:
    """The `[tool.dagster]` table of `root`/pyproject.toml ({} without one)."""
    return _tool_config(root).get("dagster", {})


def _tool_config(root: Path) -> dict:
    """The `[tool]` table of `root`/pyproject.toml ({} without one)."""
    pyproject = root / "pyproject.toml"
    try:
        return tomllib.loads(pyproject.read_text()).get("tool", {})
    except FileNotFoundError:
        return {}
    except tomllib.TOMLDecodeError as error:
        raise CodeLocationError(
            f"{pyproject.resolve()} is not valid TOML ({error}): fix it, or pass -m MODULE"
        ) from None


def configured_module(root: Path = Path()) -> str:
    """The code location `root`/pyproject.toml names, as `dagster dev` reads it there:
    `[tool.dagster] module_name`, else a `dg` project's `[tool.dg.project]`
    `code_location_target_module` (by default `<root_module>.definitions`).
    CodeLocationError when it names none, or names it by `autoload_defs` only."""
    tool = _tool_config(root)
    module = tool.get("dagster", {}).get("module_name")
    project = tool.get("dg", {}).get("project", {})
    if not module and project.get("autoload_defs"):
        raise CodeLocationError(
            f"{(root / 'pyproject.toml').resolve()} loads its defs folder with [tool.dg.project] autoload_defs, "
            "which the engine does not: add a definitions.py with `@dg.definitions def defs(): return "
            "dg.load_from_defs_folder(path_within_project=Path(__file__).parent)` and pass -m MODULE; "
            "nothing was written"
        )
    if not module and project.get("root_module"):
        module = project.get("code_location_target_module", f"{project['root_module']}.definitions")
    if not module:
        raise CodeLocationError(
            f"name the code location: -m MODULE, -f FILE, [tool.dagster] module_name or [tool.dg.project] "
            f"root_module in {(root / 'pyproject.toml').resolve()}"
        )
    return module


def workspace_target(workspace: Path) -> str:
    """The target (`load_definitions`) of the one `python_module` or `python_file` entry of
    the workspace file `workspace`, with its `attribute` when it names one; a file relative
    to the workspace's folder, as Dagster reads it. CodeLocationError when the file is missing
    or not YAML, or holds none or several such entries (naming them).

    Not guaranteed: its `working_directory` is not added to the import path (run from it).
    """
    try:
        entries = (yaml.safe_load(workspace.read_text()) or {}).get("load_from") or []
    except (OSError, yaml.YAMLError, AttributeError) as error:
        raise CodeLocationError(f"workspace file {workspace} cannot be read ({error}): check -w") from None
    targets: dict[str, str] = {}  # by location name
    for entry in entries:
        for kind, location in entry.items():
            fields = location if isinstance(location, dict) else {"module_name": location, "relative_path": location}
            if kind == "python_module":
                place = str(fields.get("module_name"))
            elif kind == "python_file":
                place = str(workspace.resolve().parent / fields.get("relative_path", ""))
            else:
                continue
            attribute = fields.get("attribute")
            targets[str(fields.get("location_name") or place)] = f"{place}:{attribute}" if attribute else place
    if len(targets) != 1:
        raise CodeLocationError(
            f"workspace file {workspace} has {len(targets)} python_module or python_file entries "
            f"({', '.join(targets) or 'none'}): pass -m MODULE[:ATTRIBUTE] or -f FILE[:ATTRIBUTE] instead; "
            "nothing was written"
        )
    return next(iter(targets.values()))


def import_module_named(target: str) -> ModuleType:
    """The module named `target` (dotted), imported. One not on the import path is a
    CodeLocationError naming it; an error raised by the module's own code is a CodeImportError
    holding its traceback (`own_code_raised`)."""
    try:
        found = importlib.util.find_spec(target)
    except (ImportError, ValueError):
        found = None
    if found is None:
        raise CodeLocationError(
            f"no module {target!r} on the import path: check -m (a dotted module name, e.g. "
            "partition_assets.example) or install the package that holds it"
        )
    with own_code_raised(target):
        return importlib.import_module(target)


@contextmanager
def own_code_raised(target: str) -> Iterator[None]:
    """Runs the import of the code location `target`; an exception its code raises becomes a
    CodeImportError (the exception chained) whose message names `target`, the exception and
    the fix, and whose `frames` are the traceback cut to the code location's own files.

    Not guaranteed: a project installed into site-packages has no frames of its own there: its
    traceback's last frame is kept. KeyboardInterrupt and SystemExit pass through as they are."""
    try:
        yield
    except Exception as error:
        frames = traceback.extract_tb(error.__traceback__)
        own = [frame for frame in frames if not _outside_the_project(frame.filename)] or frames[-1:]
        shown = "".join(["Traceback (its own frames):\n", *traceback.format_list(own)])
        shown += "".join(traceback.format_exception_only(error))
        first = (str(error).splitlines() or [""])[0]
        raise CodeImportError(
            f"{target} raised {type(error).__name__} while it was imported ({first}): fix its code, "
            "whose traceback is above; nothing was written",
            shown,
        ) from error


def _outside_the_project(filename: str) -> bool:
    """Whether a traceback's file is Python's, an installed package's or this package's."""
    if filename.startswith("<"):  # <frozen importlib._bootstrap> and the like
        return True
    path = str(Path(filename).resolve())
    installed = {sys.prefix, sys.base_prefix, *site.getsitepackages(), str(Path(__file__).resolve().parent)}
    return any(path.startswith(str(Path(place).resolve()) + "/") for place in installed)


def load_definitions(target: str) -> dg.Definitions:
    """The Definitions of a code location, resolved, loaded once per process.

    `target` names a module (dotted) or a .py file, optionally followed by `:ATTRIBUTE`, as
    workspace.yaml's `attribute` names one object of it. The object is, as Dagster loads them:
    a `dg.Definitions`; a `@dg.definitions` function (called once, here); or a `@repository`
    (its assets, asset checks, jobs and top-level resources, as a Definitions). Without an
    attribute, the module's `defs` when it is one of those, else its only one.

    Raises:
        CodeLocationError: the module or file cannot be found, it holds none or several of
            those (naming them), the attribute names none, or a `@dg.definitions` function
            raised (naming it and its exception); nothing was written.
        CodeImportError: the module's own code raised while it was imported (`own_code_raised`).
    """
    location, attribute = split_target(target)
    if location.endswith(".py"):
        if not Path(location).is_file():
            raise CodeLocationError(f"code location file {location} does not exist: check -f")
        # A file is executed again once its text changed (a module is imported once).
        key: tuple = (str(Path(location).resolve()), hashlib.sha256(Path(location).read_bytes()).digest(), attribute)
        if key not in _LOADED:
            _LOADED[key] = _definitions_of(_executed_file(location), target, attribute)
        return _LOADED[key]
    key = (location, attribute)
    if key not in _LOADED:
        _LOADED[key] = _definitions_of(import_module_named(location), target, attribute)
    return _LOADED[key]


def split_target(target: str) -> tuple[str, str | None]:
    """`target`'s module or file, and the attribute after its last `:` (None without one)."""
    location, colon, attribute = target.rpartition(":")
    if colon and attribute.isidentifier():
        return location, attribute
    return target, None


# Definitions of the code locations this process loaded: by module name, or by a file's
# resolved path and the digest of its text; and the attribute named.
_LOADED: dict[tuple, dg.Definitions] = {}

# The type of what `@dg.definitions` returns: a callable returning the Definitions (or a
# RepositoryDefinition), called when the location loads.
_DefinitionsFunction = type(dg.definitions(lambda: dg.Definitions()))

# What a code location's module may hold, as Dagster's code servers load them.
_LOADABLE = (dg.Definitions, _DefinitionsFunction, dg.RepositoryDefinition)
_LOADABLE_WORDING = "a dg.Definitions object, a @dg.definitions function or a @repository"


def _executed_file(target: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(Path(target).stem, target)
    if spec is None or spec.loader is None:
        raise CodeLocationError(f"{target} cannot be imported as a Python file: check -f")
    module = importlib.util.module_from_spec(spec)
    with own_code_raised(target):
        spec.loader.exec_module(module)
    return module


def _definitions_of(module: ModuleType, target: str, attribute: str | None) -> dg.Definitions:
    """The object of `module` that `attribute` names (else its `defs`, else its only
    loadable one), as resolved Definitions."""
    name = attribute or _chosen_attribute(module, target)
    value = getattr(module, name, None)
    if not isinstance(value, _LOADABLE):
        raise CodeLocationError(
            f"{target}: {module.__name__}.{name} is {_described(value)}, not {_LOADABLE_WORDING}: name one "
            f"that is ({_named(target, 'NAME')}); nothing was written"
        )
    loaded = _called(value, f"{module.__name__}.{name}") if isinstance(value, _DefinitionsFunction) else value
    if isinstance(loaded, dg.RepositoryDefinition):
        return resolved(_definitions_of_repository(loaded))
    # Dagster's @dg.definitions refuses a function that returns anything else.
    return resolved(cast(dg.Definitions, loaded))


def _chosen_attribute(module: ModuleType, target: str) -> str:
    """`defs` when it is loadable, else the module's only loadable attribute."""
    if isinstance(getattr(module, "defs", None), _LOADABLE):
        return "defs"
    names = sorted(name for name, value in vars(module).items() if isinstance(value, _LOADABLE))
    if len(names) == 1:
        return names[0]
    if names:
        raise CodeLocationError(
            f"{target} holds {len(names)} code locations ({', '.join(names)}): name the one to load, "
            f"e.g. {_named(target, names[0])}, or call it `defs`; nothing was written"
        )
    # A dg project's `defs/` folder, once imported, is its root module's `defs`: no object of it.
    named_defs = hasattr(module, "defs") and not isinstance(module.defs, ModuleType)
    found = f" (its `defs` is {_described(module.defs)})" if named_defs else ""
    raise CodeLocationError(
        f"{target} holds no code location{found}: define {_LOADABLE_WORDING} in it, e.g. "
        f"`defs = dg.Definitions(assets=[...])`{_definitions_module_hint(module)}; nothing was written"
    )


def _definitions_module_hint(package: ModuleType) -> str:
    """`, or name its definitions module: -m PACKAGE.definitions` when `package` is a package with
    a `definitions` module (the root module of a dg project, whose code location that is)."""
    if not hasattr(package, "__path__") or importlib.util.find_spec(f"{package.__name__}.definitions") is None:
        return ""
    return f", or name its definitions module: -m {package.__name__}.definitions"


def _named(target: str, attribute: str) -> str:
    """The option naming `attribute` of `target`'s module or file, e.g. `-m pkg.defs:analytics`."""
    location, _ = split_target(target)
    return f"{'-f' if location.endswith('.py') else '-m'} {location}:{attribute}"


def _described(value: object) -> str:
    if value is None:
        return "missing"
    if callable(value) and hasattr(value, "__name__"):
        return f"the undecorated {type(value).__name__} {value.__name__}"
    return f"a {type(value).__name__}"


def _called(
    function: Callable[[], dg.Definitions | dg.RepositoryDefinition], name: str
) -> dg.Definitions | dg.RepositoryDefinition:
    """What the `@dg.definitions` function `name` returns; CodeLocationError naming its
    exception when it raises (its traceback chained)."""
    try:
        return function()
    except Exception as error:
        raise CodeLocationError(
            f"the @dg.definitions function {name} raised {type(error).__name__}: {error}; fix it "
            "(`python -c 'import ...; ...()'` shows the traceback); nothing was written"
        ) from error


def _definitions_of_repository(repository: dg.RepositoryDefinition) -> dg.Definitions:
    """A Definitions of what the engine reads from `repository`: its assets, source assets,
    asset checks, jobs (not Dagster's implicit asset jobs, which Definitions builds again),
    top-level resources, executor and metadata.

    Not guaranteed: its schedules and sensors are left out (Dagster's daemon runs them from
    the repository itself; the engine never reads them).
    """
    implicit_jobs = set(repository.get_implicit_asset_job_names())
    executor = (
        repository.get_implicit_global_asset_job_def().executor_def
        if repository.has_implicit_global_asset_job_def()
        else None
    )
    # A multi-asset is listed once per key, an asset with checks also among the checks: once here.
    assets: dict[int, Any] = {  # AssetsDefinitions and SourceAssets
        id(asset): asset
        for asset in (*repository.assets_defs_by_key.values(), *repository.source_assets_by_key.values())
    }
    checks = {id(check): check for check in repository.asset_checks_defs_by_key.values()}
    return dg.Definitions(
        assets=list(assets.values()),
        asset_checks=[check for key, check in checks.items() if key not in assets],
        jobs=[job for job in repository.get_all_jobs() if job.name not in implicit_jobs],
        resources=repository.get_top_level_resources(),
        executor=executor,
        metadata=repository.metadata,
    )


def resolved(definitions: dg.Definitions) -> dg.Definitions:
    """`definitions`, resolved now (Dagster caches the result on the object, and every later
    use reads it): binding resources to a sensor's job, Dagster passes the sensor's beta
    `owners` on itself, as [] for a sensor without owners, and warns about it."""
    with quiet_dagster_betas():
        definitions.resolve_asset_graph()
    return definitions
