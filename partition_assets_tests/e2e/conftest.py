"""End-to-end fixtures: staged-backfill lakehouses (support/lakehouse.py), empty or with days
already published through the CLI. The published ones are built once per session and copied
for each test, which changes its copy only.

Not guaranteed: a test that changes the session's originals rather than its copy breaks the
tests after it (none does: they use published_2_days and published_3_days).
"""

from pathlib import Path

import pytest

from partition_assets_tests.support.cli_runs import ok
from partition_assets_tests.support.lakehouse import Lakehouse


@pytest.fixture
def lakehouse(tmp_path, home_template) -> Lakehouse:
    """A lakehouse with nothing in it yet."""
    return Lakehouse(tmp_path, home_template)


def published_from_january_1(root: Path, home_template: Path, last: str) -> Lakehouse:
    """A lakehouse under `root` whose January 1..`last` are backfilled and published per node."""
    base = Lakehouse(root, home_template)
    ok(base.backfill("2024-01-01", last, "--publish", "per-node"))
    return base


@pytest.fixture(scope="session")
def two_days_published(tmp_path_factory, home_template) -> Lakehouse:
    """January 1-2 published, once for the session: the tests copy it."""
    return published_from_january_1(tmp_path_factory.mktemp("two_days_published"), home_template, "2024-01-02")


@pytest.fixture(scope="session")
def three_days_published(tmp_path_factory, home_template) -> Lakehouse:
    """January 1-3 published, once for the session: the tests copy it."""
    return published_from_january_1(tmp_path_factory.mktemp("three_days_published"), home_template, "2024-01-03")


@pytest.fixture
def published_2_days(two_days_published, tmp_path) -> Lakehouse:
    """A copy of two_days_published for one test to change (the state every test reached by
    backfilling those days itself)."""
    return two_days_published.copy_to(tmp_path)


@pytest.fixture
def published_3_days(three_days_published, tmp_path) -> Lakehouse:
    """A copy of three_days_published for one test to change."""
    return three_days_published.copy_to(tmp_path)
