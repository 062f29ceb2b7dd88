"""Watching a staged backfill's publish as the coordinator walks it: the publishing stages
from the table commits to the status `published` (backfill/publishing/stages.py), those that
publish what the gate let through."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import sqlalchemy

from partition_assets.backfill.publishing import stages
from partition_assets.backfill.publishing.stage_runner import Stage


def watched_stages(
    on_statement: Callable[..., None],
    started: Callable[[], None] = lambda: None,
    ended: Callable[[], None] = lambda: None,
) -> tuple[Stage, ...]:
    """The stage list (to put in `stages.PUBLISH_STAGES`) with its publishing stages watched:
    `on_statement` (a SQLAlchemy `before_cursor_execute` listener) hears every statement while
    one runs, `started` runs before the table commits and `ended` once the status says
    published."""
    first, last = stages.PublishStage.COMMIT_TABLES, stages.PublishStage.PUBLISHED
    names = [stage.name for stage in stages.PUBLISH_STAGES]
    watched = set(names[names.index(first) : names.index(last) + 1])

    def watching(stage: Stage) -> Stage:
        def run(inputs):
            if stage.name == first:
                started()
            sqlalchemy.event.listen(sqlalchemy.engine.Engine, "before_cursor_execute", on_statement)
            try:
                result = stage.run(inputs)
            finally:
                sqlalchemy.event.remove(sqlalchemy.engine.Engine, "before_cursor_execute", on_statement)
            if stage.name == last:
                ended()
            return result

        return dataclasses.replace(stage, run=run)

    return tuple(watching(s) if s.name in watched else s for s in stages.PUBLISH_STAGES)
