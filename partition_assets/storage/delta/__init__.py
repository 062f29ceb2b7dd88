"""Delta tables through delta-rs, written through staged files and read through partition
pruning; no Delta jars are needed on Spark's classpath.

`DeltaFormat` (format.py) is the TableFormat (and StagingFormat) the IO managers and the backfill
engine call; each of its methods hands over to the module doing that one job, whose
docstrings state the contracts:

- write.py: a frame replaces (or merges into) a scope's partitions in one commit;
- read.py: a scope's rows, as published or as a backfill's staging overlays them;
- stage.py: a frame staged for a backfill, committed only when it publishes;
- publish.py: everything a backfill staged for a table, in one idempotent commit;
- rollback.py: a backfill's publish commit undone, from the log;
- schema_check.py: a table proved to read in one schema after a commit that changed it;
- vacuum.py: unreferenced files and dead staging folders deleted after a retention;
- log.py: the Delta log read: files by partition, app transactions, commit effects;
- commit.py: the one commit all of them make, retried against concurrent writers;
- tables.py: a table opened, its version, a version read whole, the release log's records:
  importable without Spark or Dagster (`partition-assets release list`);
- types.py: Delta's names for column types, the logical types schemas are compared in.

Not guaranteed: DeltaFormat keeps no state between calls: each opens the table afresh,
so two calls may see different versions (a check and the commit it guards each check
the version they act on).
"""

from typing import TYPE_CHECKING

from partition_assets.lazy_names import exported_lazily

if TYPE_CHECKING:
    from partition_assets.storage.delta.format import DeltaFormat

__all__ = ["DeltaFormat"]

# Imported when first read (lazy_names.py): tables.py and types.py load without Spark.
__getattr__, __dir__ = exported_lazily(__name__, {"partition_assets.storage.delta.format": ("DeltaFormat",)})
