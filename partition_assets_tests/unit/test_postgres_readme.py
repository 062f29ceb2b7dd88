"""README "Scaling out" shows exactly the PostgreSQL configuration the tests use
(partition_assets_tests/e2e/test_dagster_instance_postgres.py keeps an instance in it)."""

import re
import textwrap

from partition_assets_tests.support import REPO
from partition_assets_tests.support.instances import POSTGRES_STORAGE_YAML


def test_the_readme_shows_exactly_the_postgres_configuration_the_tests_use():
    section = (REPO / "README.md").read_text().split("## Scaling out", 1)[1].split("\n## ", 1)[0]
    blocks = [textwrap.dedent(block) for block in re.findall(r"```yaml\n(.*?)```", section, flags=re.S)]
    assert blocks == [POSTGRES_STORAGE_YAML]
