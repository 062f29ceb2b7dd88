"""The socket between `partition-assets backfill serve` (processes/command_server.py) and
the commands it runs for (processes/command_client.py), and the messages they exchange.

Contract:
- The socket is the file `socket_address(home)` of the instance at `home` (its folder's
  path hashed), in a folder only this user may enter (`socket_folder`: mode 0700, owned by
  this user, checked before every use and refused otherwise): another user can neither
  bind nor connect to it. The server records its pid in `pid_file(home)` beside it, which
  it holds locked while it serves.
- Each end checks the other before it trusts it (`peer_credentials`, Linux's SO_PEERCRED):
  the server runs only commands of its own user; the client sends nothing to a listener
  that is not of its user and not the process `pid_file` names.
- A request is one message carrying the command's standard input, output and error (their
  file descriptors) and a JSON object: `argv` (the command's arguments), `argv0`, `cwd`,
  `env` (its whole environment), `sys_path` (its interpreter's import path),
  `executable`, and the process settings a fork does not inherit from its client:
  `umask`, `nice`, `gid` (effective), `groups` and `rlimits` (each resource's soft and
  hard limit, by its `resource.RLIMIT_*` name).
- Every reply is one JSON object on a line: `{"pid": N}` (the process running the
  command), then `{"exit": code}`; or, instead of both, `{"refused": why}` (the caller
  runs the command itself). After `{"pid": N}` the client may send `{"signal": signum}`
  lines: the signals that reached it, for the command's process to raise in itself.

Not guaranteed: that a socket folder under XDG_RUNTIME_DIR is the one the client looks in
when the client's XDG_RUNTIME_DIR is not the server's (`sudo`, cron): the client then finds
no server and runs the command itself. Imports only the standard library: the client is
loaded before anything else.
"""

import hashlib
import json
import os
import resource
import socket
import stat
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from partition_assets.errors import CommandSocketFolderError

_LENGTH = struct.Struct("!I")
_CREDENTIALS = struct.Struct("3i")  # struct ucred: pid, uid, gid
# Standard input, output and error travel with the request.
STANDARD_FDS = (0, 1, 2)
# sun_path holds 108 bytes, its final NUL included.
_SOCKET_PATH_BYTES = 107
# The limits a request carries: every resource this interpreter knows.
RLIMIT_NAMES = tuple(sorted(name for name in dir(resource) if name.startswith("RLIMIT_")))


class ProtocolError(Exception):
    """A message that is not one this protocol sends (a truncated request, say)."""


def socket_folder() -> Path:
    """The folder of this user's command server sockets, created if missing: `partition-assets`
    in XDG_RUNTIME_DIR, else `/tmp/partition-assets-<uid>`. Both it and XDG_RUNTIME_DIR are
    checked to be folders (not links) of this user with mode 0700, so that no other user can
    bind, replace or connect to a socket in it.

    Raises:
        CommandSocketFolderError: a folder is not private to this user; nothing was created in it.
    """
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        _check_private(Path(runtime), "XDG_RUNTIME_DIR")
        folder = Path(runtime) / "partition-assets"
    else:  # /tmp is sticky: the folder of this user cannot be renamed or replaced by another
        folder = Path("/tmp") / f"partition-assets-{os.getuid()}"
    try:
        folder.mkdir(mode=0o700)
    except FileExistsError:
        pass  # made before (or by someone else: checked next)
    _check_private(folder, "the command server's socket folder")
    return folder


def _check_private(folder: Path, role: str) -> None:
    uid = os.getuid()
    problem = None
    if not folder.is_absolute():
        problem = "is not an absolute path"
    else:
        status = os.lstat(folder)
        if not stat.S_ISDIR(status.st_mode):
            problem = "is not a folder (a link?)"
        elif status.st_uid != uid:
            problem = f"belongs to user {status.st_uid}"
        elif status.st_mode & 0o077:
            problem = f"has mode {stat.S_IMODE(status.st_mode):04o}, which lets other users in"
    if problem is not None:
        raise CommandSocketFolderError(
            f"{role} {folder} {problem}: the command server's socket must be in a folder of user {uid} (this "
            "user) with mode 0700. Remove that folder (or set XDG_RUNTIME_DIR to such a folder), then retry. "
            "Nothing was served or sent."
        )


def socket_address(home: str) -> str:
    """The path of the command server's socket for the Dagster instance at `home` (DAGSTER_HOME).

    Raises:
        CommandSocketFolderError: its folder is not private, or the path is longer than a socket's.
    """
    path = str(socket_folder() / f"{_instance_name(home)}.sock")
    if len(os.fsencode(path)) > _SOCKET_PATH_BYTES:
        raise CommandSocketFolderError(
            f"the command server's socket path {path} is longer than a Unix socket path may be "
            f"({_SOCKET_PATH_BYTES} bytes): set XDG_RUNTIME_DIR to a shorter private folder. "
            "Nothing was served or sent."
        )
    return path


def pid_file(home: str) -> Path:
    """The file where the command server of the instance at `home` records its pid, beside its socket."""
    return socket_folder() / f"{_instance_name(home)}.pid"


def _instance_name(home: str) -> str:
    return hashlib.sha256(str(Path(home).resolve()).encode()).hexdigest()[:32]


def recorded_server_pid(home: str) -> int | None:
    """The pid the command server of `home` recorded, if a file of this user records one."""
    try:
        fd = os.open(pid_file(home), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    with open(fd, "rb") as recorded:
        if os.fstat(fd).st_uid != os.getuid():
            return None
        text = recorded.read(32).decode(errors="replace").strip()
    return int(text) if text.isdigit() else None


def peer_credentials(connection: socket.socket) -> tuple[int, int]:
    """The pid and user id of the process at the other end of `connection` (Linux's
    SO_PEERCRED: for a client, the process that listened)."""
    credentials = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CREDENTIALS.size)
    pid, uid, _gid = _CREDENTIALS.unpack(credentials)
    return pid, uid


def send_request(connection: socket.socket, request: dict[str, Any]) -> None:
    """Sends `request` with this process's standard input, output and error."""
    payload = json.dumps(request).encode()
    message = _LENGTH.pack(len(payload)) + payload
    sent = socket.send_fds(connection, [message], list(STANDARD_FDS))
    if sent < len(message):  # sendall(b"") would still write, and fail once a quick refusal closed the socket
        connection.sendall(message[sent:])


def receive_request(connection: socket.socket) -> tuple[dict[str, Any], list[int]]:
    """The request on `connection` and the descriptors sent with it (the receiver owns
    them). Raises ProtocolError for anything else."""
    chunk, fds, _flags, _address = socket.recv_fds(connection, 1 << 16, len(STANDARD_FDS))
    try:
        if len(fds) != len(STANDARD_FDS) or len(chunk) < _LENGTH.size:
            raise ProtocolError(f"a request carries {len(STANDARD_FDS)} descriptors and a length")
        (length,) = _LENGTH.unpack_from(chunk)
        payload = chunk[_LENGTH.size :]
        while len(payload) < length:
            more = connection.recv(length - len(payload))
            if not more:
                raise ProtocolError("the request ended early")
            payload += more
        return _checked(json.loads(payload)), fds
    except (ProtocolError, ValueError) as error:
        for fd in fds:
            os.close(fd)
        raise ProtocolError(str(error)) from error


# Each field of a request, and what it holds.
_FIELDS: dict[str, Any] = {
    "argv": list,
    "argv0": str,
    "cwd": str,
    "env": dict,
    "sys_path": list,
    "executable": str,
    "umask": int,
    "nice": int,
    "gid": int,
    "groups": list,
    "rlimits": dict,
}


def _checked(request: Any) -> dict[str, Any]:
    if not isinstance(request, dict) or set(request) != set(_FIELDS):
        raise ProtocolError(f"a request is a JSON object of {sorted(_FIELDS)}")
    for field, kind in _FIELDS.items():
        if not isinstance(request[field], kind) or (kind is int and isinstance(request[field], bool)):
            raise ProtocolError(f"a request's {field} is a {kind.__name__}")
    strings = [*request["argv"], *request["sys_path"], *request["env"].keys(), *request["env"].values()]
    if not all(isinstance(item, str) for item in strings):
        raise ProtocolError("a request's arguments, import path and environment are strings")
    if not 0 <= request["umask"] <= 0o777:
        raise ProtocolError(f"a request's umask {request['umask']} is not a mode from 0o000 to 0o777")
    limits = request["rlimits"]
    if not set(limits) <= set(RLIMIT_NAMES) or not all(_is_pair_of_ints(pair) for pair in limits.values()):
        raise ProtocolError(f"a request's rlimits map names of {RLIMIT_NAMES} to a soft and a hard limit")
    if not all(type(group) is int for group in request["groups"]):
        raise ProtocolError("a request's groups are group ids")
    return request


def _is_pair_of_ints(value: Any) -> bool:
    return isinstance(value, list) and len(value) == 2 and all(type(limit) is int for limit in value)


def send_line(connection: socket.socket, **message: Any) -> None:
    """Sends `message` as one JSON line: a reply, or a signal the client forwards."""
    connection.sendall(json.dumps(message).encode() + b"\n")


def replies(connection: socket.socket) -> Iterator[dict[str, Any]]:
    """The replies on `connection`, one dict each, until it closes."""
    with connection.makefile("rb") as lines:
        for line in lines:
            yield json.loads(line)
