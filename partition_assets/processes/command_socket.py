"""The socket between `partition-assets backfill serve` (processes/command_server.py) and
the commands it runs for (processes/command_client.py), and the messages they exchange.

Contract:
- The socket is the Unix socket `socket_address(home)` of the instance at `home`: a name in
  Linux's abstract namespace, made from the instance folder's path (so any DAGSTER_HOME,
  however long, has one; it disappears with its server, never left stale). Any local user
  could connect to such a name: the server runs only commands of its own user (the
  peer's credentials, `peer_uid`).
- A request is one message carrying the command's standard input, output and error (their
  file descriptors) and a JSON object: `argv` (the command's arguments), `argv0`, `cwd`,
  `env` (its whole environment), `sys_path` (its interpreter's import path) and
  `executable`.
- Every reply is one JSON object on a line: `{"pid": N}` (the process running the
  command), then `{"exit": code}`; or, instead of both, `{"refused": why}` (the caller
  runs the command itself).

Imports only the standard library: the client is loaded before anything else.
"""

import hashlib
import json
import os
import socket
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_LENGTH = struct.Struct("!I")
_CREDENTIALS = struct.Struct("3i")  # struct ucred: pid, uid, gid
# Standard input, output and error travel with the request.
STANDARD_FDS = (0, 1, 2)


class ProtocolError(Exception):
    """A message that is not one this protocol sends (a truncated request, say)."""


def socket_address(home: str) -> str:
    """The command server's socket address for the Dagster instance at `home` (DAGSTER_HOME)."""
    digest = hashlib.sha256(str(Path(home).resolve()).encode()).hexdigest()[:32]
    return f"\0partition-assets-command-server-{digest}"


def peer_uid(connection: socket.socket) -> int:
    """The user id of the process at the other end of `connection` (Linux's SO_PEERCRED)."""
    credentials = connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CREDENTIALS.size)
    _pid, uid, _gid = _CREDENTIALS.unpack(credentials)
    return uid


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
}


def _checked(request: Any) -> dict[str, Any]:
    if not isinstance(request, dict) or set(request) != set(_FIELDS):
        raise ProtocolError(f"a request is a JSON object of {sorted(_FIELDS)}")
    for field, kind in _FIELDS.items():
        if not isinstance(request[field], kind):
            raise ProtocolError(f"a request's {field} is a {kind.__name__}")
    strings = [*request["argv"], *request["sys_path"], *request["env"].keys(), *request["env"].values()]
    if not all(isinstance(item, str) for item in strings):
        raise ProtocolError("a request's arguments, import path and environment are strings")
    return request


def send_reply(connection: socket.socket, **reply: Any) -> None:
    connection.sendall(json.dumps(reply).encode() + b"\n")


def replies(connection: socket.socket) -> Iterator[dict[str, Any]]:
    """The replies on `connection`, one dict each, until it closes."""
    with connection.makefile("rb") as lines:
        for line in lines:
            yield json.loads(line)
