"""Processes for tests that race real processes against each other (claims, leases, freezes,
status changes): forks of multiprocessing's fork server, a fresh interpreter that has imported
Dagster and this library once, rather than spawned interpreters that each import them again
(~3 CPU-s a racer, 24 racers over the suite). Each racer is still a process of its own, with no
state of the test's process: the server forked it from imports alone. It takes the test's
environment and directory when it starts (the server keeps those it started with).

Not guaranteed: the server is this process's one fork server (multiprocessing keeps one), so
the modules it preloads are those of whoever started it first: a racer imports what it
lacks when it starts.
"""

import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from multiprocessing.context import ForkServerContext
from multiprocessing.process import BaseProcess
from typing import Any

_PRELOAD = ["dagster", "partition_assets.backfill", "partition_assets.storage", "partition_assets.instance"]


def racing_context(*modules: str) -> ForkServerContext:
    """A forkserver context, its server (when this context starts it) preloading Dagster, this
    library and `modules` (the test modules whose functions the racers run)."""
    context = ForkServerContext()
    context.set_forkserver_preload([*_PRELOAD, *modules])
    return context


def racing_process(context: ForkServerContext, target: Callable[..., Any], *args: Any) -> BaseProcess:
    """A process of `context`, not started, that runs `target(*args)` in the test's environment."""
    return context.Process(target=_in_test_setting, args=(_test_setting(), target, *args))


def racing_pool(workers: int, *modules: str) -> ProcessPoolExecutor:
    """A pool of `workers` processes of `racing_context(*modules)`, in the test's environment."""
    return ProcessPoolExecutor(
        workers, mp_context=racing_context(*modules), initializer=_take_setting, initargs=(_test_setting(),)
    )


def _test_setting() -> tuple[dict[str, str], str]:
    return dict(os.environ), os.getcwd()


def _take_setting(setting: tuple[dict[str, str], str]) -> None:
    environment, directory = setting
    os.environ.clear()
    os.environ.update(environment)
    os.chdir(directory)


def _in_test_setting(setting: tuple[dict[str, str], str], target: Callable[..., Any], *args: Any) -> Any:
    _take_setting(setting)
    return target(*args)
