"""Which code location a backfill loads, and loading it.

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
import tomllib
from pathlib import Path
from types import ModuleType

import dagster as dg

from partition_assets.dagster_betas import quiet_dagster_betas
from partition_assets.errors import CodeLocationError


def dagster_config(root: Path) -> dict:
    """The `[tool.dagster]` table of `root`/pyproject.toml ({} without one)."""
    pyproject = root / "pyproject.toml"
    try:
        return tomllib.loads(pyproject.read_text()).get("tool", {}).get("dagster", {})
    except FileNotFoundError:
        return {}
    except tomllib.TOMLDecodeError as error:
        raise CodeLocationError(
            f"{pyproject.resolve()} is not valid TOML ({error}): fix it, or pass -m MODULE"
        ) from None


def configured_module(root: Path = Path()) -> str:
    """`[tool.dagster] module_name` of `root`/pyproject.toml; CodeLocationError when absent."""
    module = dagster_config(root).get("module_name")
    if not module:
        raise CodeLocationError(
            f"name the code location: -m MODULE, -f FILE, or [tool.dagster] module_name in "
            f"{(root / 'pyproject.toml').resolve()}"
        )
    return module


def import_module_named(target: str) -> ModuleType:
    """The module named `target` (dotted), imported. One not on the import path is a
    CodeLocationError naming it; an error raised by the module's own code propagates as it is."""
    try:
        found = importlib.util.find_spec(target)
    except (ImportError, ValueError):
        found = None
    if found is None:
        raise CodeLocationError(
            f"no module {target!r} on the import path: check -m (a dotted module name, e.g. "
            "partition_assets.example) or install the package that holds it"
        )
    return importlib.import_module(target)


def load_definitions(target: str) -> dg.Definitions:
    """The Definitions of a code location: `target` is a module name or a .py file path.

    Takes the module's `defs`, or its only Definitions object, resolved. A module that cannot
    be found or imported is a CodeLocationError naming it; an error raised by the
    module's own code while it is imported propagates as it is.
    """
    if target.endswith(".py"):
        if not Path(target).is_file():
            raise CodeLocationError(f"code location file {target} does not exist: check -f")
        loaded = (str(Path(target).resolve()), hashlib.sha256(Path(target).read_bytes()).digest())
        if loaded not in _LOADED_FILES:
            _LOADED_FILES[loaded] = _definitions_of(_executed_file(target), target)
        return _LOADED_FILES[loaded]
    return _definitions_of(import_module_named(target), target)


# Definitions of the files this process loaded, by resolved path and the digest of their text.
_LOADED_FILES: dict[tuple[str, bytes], dg.Definitions] = {}


def _executed_file(target: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(Path(target).stem, target)
    if spec is None or spec.loader is None:
        raise CodeLocationError(f"{target} cannot be imported as a Python file: check -f")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _definitions_of(module: ModuleType, target: str) -> dg.Definitions:
    """The module's `defs`, or its only Definitions object, resolved."""
    if isinstance(getattr(module, "defs", None), dg.Definitions):
        return resolved(module.defs)
    definitions = [value for value in vars(module).values() if isinstance(value, dg.Definitions)]
    if len(definitions) != 1:
        raise CodeLocationError(f"{target} has {len(definitions)} Definitions objects: name the one to use `defs`")
    return resolved(definitions[0])


def resolved(definitions: dg.Definitions) -> dg.Definitions:
    """`definitions`, resolved now (Dagster caches the result on the object, and every later
    use reads it): binding resources to a sensor's job, Dagster passes the sensor's beta
    `owners` on itself, as [] for a sensor without owners, and warns about it."""
    with quiet_dagster_betas():
        definitions.resolve_asset_graph()
    return definitions
