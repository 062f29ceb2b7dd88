"""MkDocs hooks of the docs site (mkdocs.yml `hooks:`): what the site reads from outside docs/.

- Every file of bench/results/ is served at `bench/results/<name>` (Markdown as a page, the
  rest as a download), so the Benchmarks page links the measured results themselves; a file
  there that the Benchmarks page does not link fails the build.
- `<!-- not-guaranteed -->` in a page becomes every module's "Not guaranteed" part of its
  docstring, and `<!-- module-map -->` each module's first docstring paragraph: read from the
  source (never imported) at each build, so the site follows the code without copies.

Not guaranteed: a module's "Not guaranteed" part is taken to run from the line that starts
with "Not guaranteed" to the end of its docstring; text after it in the same docstring is
shown with it.
"""

import ast
import re
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

_RESULTS = Path("bench/results")
_PACKAGE = Path("partition_assets")
_BENCHMARKS_PAGE = "benchmarks.md"
_NOT_GUARANTEED_MARK = "<!-- not-guaranteed -->"
_MODULE_MAP_MARK = "<!-- module-map -->"
# "Not guaranteed:" or a qualified "Not guaranteed by the protocol:", at a line's start.
_NOT_GUARANTEED = re.compile(r"^Not guaranteed\b[^:\n]*:", re.MULTILINE)


def _root(config: MkDocsConfig) -> Path:
    return Path(config.config_file_path).parent


def on_files(files: Files, config: MkDocsConfig, **_: Any) -> Files:
    for path in sorted((_root(config) / _RESULTS).iterdir()):
        files.append(File.generated(config, f"{_RESULTS.as_posix()}/{path.name}", abs_src_path=str(path)))
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, **_: Any) -> str:
    root = _root(config)
    if page.file.src_uri == _BENCHMARKS_PAGE:
        _check_every_result_linked(markdown, root)
    if _NOT_GUARANTEED_MARK in markdown:
        markdown = markdown.replace(_NOT_GUARANTEED_MARK, _not_guaranteed(root))
    if _MODULE_MAP_MARK in markdown:
        markdown = markdown.replace(_MODULE_MAP_MARK, _module_map(root))
    return markdown


def _check_every_result_linked(markdown: str, root: Path) -> None:
    names = sorted(path.name for path in (root / _RESULTS).iterdir())
    unlinked = [name for name in names if f"({_RESULTS.as_posix()}/{name})" not in markdown]
    if unlinked:
        raise PluginError(
            f"docs/{_BENCHMARKS_PAGE} links no {', '.join(unlinked)} of {_RESULTS}/: every measured result is "
            f"linked from the Benchmarks page; add a link `({_RESULTS.as_posix()}/<name>)` with what it measured. "
            "The site was not written."
        )


def _docstrings(root: Path) -> list[tuple[Path, str]]:
    """(path inside the package, docstring) of every module that has one, in path order."""
    found = []
    for path in sorted((root / _PACKAGE).rglob("*.py")):
        docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
        if docstring:
            found.append((path.relative_to(root / _PACKAGE), docstring))
    return found


def _not_guaranteed(root: Path) -> str:
    sections = []
    for path, docstring in _docstrings(root):
        found = _NOT_GUARANTEED.search(docstring)
        if found:
            qualifier = found.group(0).removeprefix("Not guaranteed").rstrip(":").strip()
            rest = docstring[found.end() :].strip()
            body = rest[:1].upper() + rest[1:]
            lead = f"*Not guaranteed {qualifier}:*\n\n" if qualifier else ""
            sections.append(f"### `{path.as_posix()}`\n\n{lead}{body}")
    return "\n\n".join(sections)


def _module_map(root: Path) -> str:
    """A section per package (its docstring's first paragraph), a table row per module."""
    intros: dict[Path, str] = {}
    rows: dict[Path, list[str]] = {}
    for path, docstring in _docstrings(root):
        first_paragraph = " ".join(docstring.split("\n\n")[0].split()).rstrip(":")
        if path.name == "__init__.py":
            intros[path.parent] = first_paragraph
        else:
            rows.setdefault(path.parent, []).append(f"| `{path.name}` | {first_paragraph} |")
    sections = []
    for folder in sorted(intros.keys() | rows.keys()):
        table = "\n".join(["| module | what it is |", "| --- | --- |", *rows[folder]]) if folder in rows else ""
        sections.append(f"### `{(_PACKAGE / folder).as_posix()}/`\n\n{intros.get(folder, '')}\n\n{table}")
    return "\n\n".join(sections)
