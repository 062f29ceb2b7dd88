"""How long a Spark Connect call keeps retrying a server it cannot reach, and telling
whether a server is reachable at all.

Spark Connect's client retries a call whose server is unreachable (gRPC UNAVAILABLE: the
server was killed, restarted or is out of the network) for more than ten minutes, by
design, and retries it again at exit: a backfill's coordinator and node runs whose Spark
server died hung that long on every call (issue 39, hole 7). Every session
`SparkResource` opens retries exactly as Spark's own policy does, but gives up
`unreachable_seconds()` (PARTITION_ASSETS_SPARK_UNREACHABLE_SECONDS, default 60) after the
call's first retryable failure (spark/retry_policy.py): the call then raises the client's
error, and the run or the coordinator fails instead of hanging.

A session whose server was killed and started again (by `backfill resume`, another run, the
operator) is closed by Spark's client at its next call (the new server does not know it), and
every later call says only `[NO_ACTIVE_SESSION]`; `lost_server` tells such an error, or one of a
server nothing listens at, from a Spark error of the work itself, so that the run's failure names
the server (SparkResource.naming_a_gone_server).

Not guaranteed: a server that keeps its connections open without answering (a JVM
stopped by SIGSTOP, a network that drops packets without resetting connections) fails
no call: its calls wait as long as the server does; a query that runs for long on a live
server is never cut short.
"""

import socket
import urllib.parse

from pyspark.errors import PySparkException

from partition_assets.settings import positive_seconds

UNREACHABLE_ENV = "PARTITION_ASSETS_SPARK_UNREACHABLE_SECONDS"
DEFAULT_UNREACHABLE_SECONDS = 60.0
# Spark Connect's port when an sc:// URL names none.
_DEFAULT_CONNECT_PORT = 15002
# What Spark's Connect client raises on a call of a session its restarted server no longer
# knows: the server's refusal, then (the client closed the session) on every later call.
_LOST_SESSION_CONDITIONS = frozenset({"INVALID_HANDLE.SESSION_CHANGED", "NO_ACTIVE_SESSION"})
# How long `listening` waits for a connection: a live local or cluster server accepts within it.
_PROBE_SECONDS = 2.0


def unreachable_seconds() -> float:
    """Seconds a Spark call retries a server it cannot reach: PARTITION_ASSETS_SPARK_UNREACHABLE_SECONDS, default 60.

    Raises:
        EnvironmentSetupError: PARTITION_ASSETS_SPARK_UNREACHABLE_SECONDS is set but not a positive number.
    """
    return positive_seconds(UNREACHABLE_ENV, DEFAULT_UNREACHABLE_SECONDS)


def listening(url: str) -> bool:
    """Whether something accepts connections at the host and port of the Spark Connect URL
    `url` (sc://host[:port][/;params]): a killed server's port refuses them at once."""
    parsed = urllib.parse.urlparse(url)
    host, port = parsed.hostname or "localhost", parsed.port or _DEFAULT_CONNECT_PORT
    try:
        with socket.create_connection((host, port), timeout=_PROBE_SECONDS):
            return True
    except OSError:
        return False


def lost_server(error: BaseException, url: str, session_closed: bool) -> bool:
    """Whether `error`, raised by a call of a Spark Connect session on `url`, is the server's loss
    rather than the work's: a call that stayed unreachable (gRPC UNAVAILABLE, after its retries),
    a Spark error while nothing listens at `url`, or while the session is closed
    (`session_closed`: its server restarted under it) or that says it is."""
    if not isinstance(error, PySparkException):
        return False
    if session_closed or error.getCondition() in _LOST_SESSION_CONDITIONS:
        return True
    # Only once a call failed: it imports grpc, which a process that opens no Connect session never needs.
    from pyspark.errors.exceptions.connect import SparkConnectGrpcException

    unreachable = isinstance(error, SparkConnectGrpcException) and error.getGrpcStatusCode().name == "UNAVAILABLE"
    return unreachable or not listening(url)
