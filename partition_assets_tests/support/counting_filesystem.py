"""A filesystem that counts its folder listings: the local filesystem behind pyarrow's
`PyFileSystem`, every call passed on unchanged, each listing (a `FileSelector`) counted by
the folder it lists. Put it where a module opens a table's filesystem to count what that
module lists."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import pyarrow.fs as pafs

from partition_assets.storage.write_staging import table_filesystem


class CountingHandler(pafs.FileSystemHandler):
    """Passes every call to `fs`; counts listings in `listed` by the folder listed."""

    def __init__(self, fs: pafs.FileSystem, listed: Counter[str]) -> None:
        self.fs = fs
        self.listed = listed

    def get_type_name(self) -> str:
        return f"counting+{self.fs.type_name}"

    def normalize_path(self, path: str) -> str:
        return self.fs.normalize_path(path)

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        return self.fs.get_file_info(paths)

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        self.listed[selector.base_dir] += 1
        return self.fs.get_file_info(selector)

    def create_dir(self, path: str, recursive: bool) -> None:
        self.fs.create_dir(path, recursive=recursive)

    def delete_dir(self, path: str) -> None:
        self.fs.delete_dir(path)

    def delete_dir_contents(self, path: str, missing_dir_ok: bool = False) -> None:
        self.fs.delete_dir_contents(path, missing_dir_ok=missing_dir_ok)

    def delete_root_dir_contents(self) -> None:
        raise NotImplementedError("not passed on: nothing under test deletes a filesystem's root")

    def delete_file(self, path: str) -> None:
        self.fs.delete_file(path)

    def move(self, src: str, dest: str) -> None:
        self.fs.move(src, dest)

    def copy_file(self, src: str, dest: str) -> None:
        self.fs.copy_file(src, dest)

    def open_input_stream(self, path: str) -> object:
        return self.fs.open_input_stream(path)

    def open_input_file(self, path: str) -> object:
        return self.fs.open_input_file(path)

    def open_output_stream(self, path: str, metadata: dict | None) -> object:
        return self.fs.open_output_stream(path, metadata=metadata)

    def open_append_stream(self, path: str, metadata: dict | None) -> object:
        return self.fs.open_append_stream(path, metadata=metadata)


def counting_table_filesystem(listed: Counter[str]) -> Callable[[str], tuple[pafs.FileSystem, str]]:
    """A stand-in for write_staging.table_filesystem whose filesystems count their listings in `listed`."""

    def opened(table_uri: str) -> tuple[pafs.FileSystem, str]:
        fs, root = table_filesystem(table_uri)
        return pafs.PyFileSystem(CountingHandler(fs, listed)), root

    return opened
