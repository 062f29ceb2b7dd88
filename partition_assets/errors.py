"""Every error partition_assets raises on purpose: one base, one typed subclass per kind.

Catch these by type, never by message text. Each message names the value, the
rule it breaks and the fix, and says when nothing was written. The standard
exception each one also derives from (ValueError, LookupError, ...) keeps callers
that caught those working.
"""


class PartitionAssetsError(Exception):
    """Base of every error partition_assets raises on purpose."""


class PartitionDefinitionError(PartitionAssetsError, ValueError):
    """A partitions definition or mapping was given a bad value."""


class BackfillPlanError(PartitionAssetsError, ValueError):
    """A backfill spec is invalid or plans nothing; nothing was recorded or launched."""


class SchedulingError(PartitionAssetsError, ValueError):
    """A launcher broke the scheduling core's contract (results for a unit it was not running)."""


class UnknownBackfillError(PartitionAssetsError, LookupError):
    """No backfill is recorded under that id."""


class CodeLocationError(PartitionAssetsError, ValueError):
    """A code location cannot be named or loaded."""


class PartitionScopeError(PartitionAssetsError, ValueError):
    """Data does not fit the partitions of the run; nothing was written."""


class TableSchemaError(PartitionAssetsError, ValueError):
    """A write does not match its table's schema or partitioning; nothing was written."""


class TableNotFoundError(PartitionAssetsError, FileNotFoundError):
    """A table that must exist does not (an upstream never materialized, a wrong path)."""


class UnsupportedByFormatError(PartitionAssetsError, ValueError):
    """The table format cannot do what was asked (merge or time travel on Parquet)."""


class CommitError(PartitionAssetsError, RuntimeError):
    """A table commit could not be made; the table is unchanged."""


class ConcurrentPartitionWriteError(CommitError):
    """The partitions a merge read changed before it committed; the merge must start over."""


class DeployError(PartitionAssetsError):
    """A deploy that cannot be made or found."""


class SparkConnectServerError(PartitionAssetsError, RuntimeError):
    """The local Spark Connect server could not be started."""


class JavaNotFoundError(PartitionAssetsError, RuntimeError):
    """No Java >= 17 was found."""


class OutputTypeError(PartitionAssetsError, TypeError):
    """An asset returned an object its IO manager does not store."""


class EnvironmentSetupError(PartitionAssetsError, RuntimeError):
    """The environment lacks a setting partition_assets needs (e.g. DAGSTER_HOME)."""
