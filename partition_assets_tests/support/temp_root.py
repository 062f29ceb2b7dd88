"""Where the test session's temporary folders go: in memory when the machine allows.

Contract: `session_temp_dir()` is the folder to set as TMPDIR (so that `tempfile`, pytest's
tmp_path and every process a test starts use it) before anything asks for a temporary
folder: a folder of the tests' own under the first root that qualifies,
PARTITION_ASSETS_TEST_TMP if set (any folder), else /dev/shm if it is a writable tmpfs with
at least 8 GiB free; else the temporary folder `tempfile` would use anyway. Every process of
one session (pytest-xdist's workers too) gets the same folder.

Not guaranteed: that the session fits in memory: the 8 GiB floor is about 20 times what a
whole `make test` writes (about 300 MB); a larger run needs PARTITION_ASSETS_TEST_TMP=/tmp.
"""

import os
import tempfile
from pathlib import Path

ROOT_ENV = "PARTITION_ASSETS_TEST_TMP"
_SHM = Path("/dev/shm")
_MIN_FREE_BYTES = 8 * 2**30
_SESSION_DIR = "partition-assets-tests"


def session_temp_dir() -> str:
    root = _chosen_root()
    if root is None:
        return tempfile.gettempdir()
    session_dir = root / _SESSION_DIR
    session_dir.mkdir(exist_ok=True)
    tempfile.tempdir = None  # forget a folder looked up before TMPDIR changes
    return str(session_dir)


def _chosen_root() -> Path | None:
    if os.environ.get(ROOT_ENV):
        return Path(os.environ[ROOT_ENV])
    if not (_SHM.is_dir() and os.access(_SHM, os.W_OK) and _is_tmpfs(_SHM)):
        return None
    stats = os.statvfs(_SHM)
    return _SHM if stats.f_bavail * stats.f_frsize >= _MIN_FREE_BYTES else None


def _is_tmpfs(path: Path) -> bool:
    mounts = Path("/proc/mounts")
    if not mounts.exists():
        return False
    return any(
        fields[1] == str(path) and fields[2] == "tmpfs"
        for fields in (line.split() for line in mounts.read_text().splitlines())
        if len(fields) > 2
    )
