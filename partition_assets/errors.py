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


class BackfillIdError(BackfillPlanError):
    """A backfill id cannot name a file or folder (`/`, `..`, an absolute path); nothing was written."""


class UnknownCommitError(BackfillPlanError):
    """`--produced-by` names a commit the code location's git repository does not hold; nothing was planned."""


class CommitRangeError(BackfillPlanError):
    """`--produced-by A..B` names a range whose first end is no ancestor of its last; nothing was planned."""


class NoCodeVersionError(BackfillPlanError):
    """`--stale` selects an asset without a code version, whose code changes cannot be told; nothing was planned."""


class MissingParentPartitionError(BackfillPlanError):
    """A backfill's partition reads a parent partition that does not exist, and the input's mapping
    does not allow that (Dagster's backfill refuses it too); nothing was planned."""


class CodeLocationError(PartitionAssetsError, ValueError):
    """A code location cannot be named or loaded."""


class CodeImportError(CodeLocationError):
    """The code location's own code raised while it was imported; nothing was written. `frames`:
    the traceback cut to the code location's files (none of Python's, Dagster's or this
    package's), ending with the exception, as the command line prints it above the message."""

    def __init__(self, message: str, frames: str) -> None:
        super().__init__(message)
        self.frames = frames


class PartitionScopeError(PartitionAssetsError, ValueError):
    """Data does not fit the partitions of the run; nothing was written."""


class TableSchemaError(PartitionAssetsError, ValueError):
    """A write does not match its table's schema or partitioning; nothing was written."""


class SchemaChangeError(TableSchemaError):
    """A backfill's schema change cannot be made as asked (a retype or drop over a partial
    range, a bad rename or split declaration); nothing was written."""


class TableNotFoundError(PartitionAssetsError, FileNotFoundError):
    """A table that must exist does not (an upstream never materialized, a wrong path)."""


class VacuumRetentionError(PartitionAssetsError, ValueError):
    """A vacuum retention is shorter than an hour, or not a number of hours; nothing was deleted."""


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


class SparkServerGoneError(PartitionAssetsError, RuntimeError):
    """The Spark Connect server a backfill's coordinator and node runs use stopped listening
    while it ran: the backfill failed, its leases parked, nothing was published."""


class DatabaseUnreachableError(PartitionAssetsError, RuntimeError):
    """The Dagster instance's database server did not answer for longer than a process riding
    out its restarts waits (dagster_instance/storage.py `riding_out_database_restarts`)."""


class JavaNotFoundError(PartitionAssetsError, RuntimeError):
    """No Java >= 17 was found."""


class OutputTypeError(PartitionAssetsError, TypeError):
    """An asset returned an object its IO manager does not store."""


class EnvironmentSetupError(PartitionAssetsError, RuntimeError):
    """The environment lacks a setting partition_assets needs (e.g. DAGSTER_HOME)."""


class CommandSocketFolderError(EnvironmentSetupError):
    """The command server's socket folder is not private to this user (owner, mode, a link) or
    its socket path is too long; nothing was served or sent."""


class PartitionLeasedError(PartitionAssetsError, RuntimeError):
    """Another backfill or run holds a lease on partitions this write needs; nothing was written."""


class LeaseProofError(PartitionLeasedError):
    """A run claims a backfill by its tags without the proof its coordinator gives its own node
    runs, and so writes as a production run, which a lease refuses; nothing was written."""


class ForeignCommitError(CommitError):
    """A commit outside the backfill changed its partitions since it started; nothing was
    committed to that table."""


class StagingMissingError(CommitError):
    """A table of a backfill to publish holds neither its staged data nor its publish commit
    (its staging folder was deleted); nothing was committed to any table."""


class StagingChangedError(CommitError):
    """A backfill's staged data changed since its gate evaluated it; nothing was committed."""


class GateFailedError(PartitionAssetsError, RuntimeError):
    """A backfill's validation gate failed; nothing was published."""


class RollbackError(PartitionAssetsError, RuntimeError):
    """A rollback cannot restore the backfill's partitions; nothing was committed."""


class SchemaRollbackError(RollbackError):
    """Rolling back a schema change would leave files of two schemas in one table (a partition
    outside the backfill was written since its publish); nothing was committed."""


class BackfillStateError(PartitionAssetsError, ValueError):
    """The backfill is not in a state that allows this action (e.g. publishing one still running)."""


class IllegalTransitionError(BackfillStateError):
    """The backfill's status may not become the one asked for (backfill/state/status.py); the
    message names its status and the command that fits it; nothing was written."""


class MixedSchemaError(TableSchemaError):
    """A table's data files hold columns its schema lacks or a changed column in another type,
    found by the check after a commit that changed its schema; the commit stands, the message
    names the files and how to undo it."""


class StoreSchemaError(PartitionAssetsError, RuntimeError):
    """The instance's backfill tables were created by a newer partition_assets; nothing was written."""


class StateFormatError(StoreSchemaError):
    """State another process wrote (a record, an announcement, a lease, the ledger, ...) is in a
    format newer than this partition_assets reads (state_formats.py); it was not read, nothing was written."""


class ProvenanceIndexVersionError(StateFormatError):
    """The instance's provenance index was written by a newer partition_assets; nothing was written."""


class CoordinatorLiveError(BackfillStateError):
    """The backfill's coordinator is live: this action would race it; nothing was changed."""


class PartiallyPublishedError(CommitError):
    """A publish stopped after some of the backfill's tables were committed; the message
    names those published and those not, and the two ways on (finish or roll back)."""


class LeaseLapsedError(PartitionAssetsError, RuntimeError):
    """A backfill lost a lease (or its coordinator's claim) before publishing; nothing was published."""


class GateConfigError(PartitionAssetsError, ValueError):
    """A backfill gate declaration or override is invalid; nothing was run or written."""


class NotificationHookError(PartitionAssetsError, TypeError):
    """The backfill notification hook configured on the Definitions is not a plain callable."""


class MissingPredecessorError(PartitionAssetsError, LookupError):
    """A self-dependent partition's predecessor holds no data; nothing was written."""


class PartitionScheduleError(PartitionAssetsError, ValueError):
    """A partitioned schedule was given a bad cron, lookback, selection or tick; nothing was requested."""


class SensorConfigError(PartitionAssetsError, ValueError):
    """A sensor factory was given a bad setting; no sensor was defined."""


class SparkConfigError(PartitionAssetsError, ValueError):
    """A Spark setting from the environment (PARTITION_ASSETS_SPARK_CONF) is malformed; nothing was started."""


class WallClockError(PartitionAssetsError, ValueError):
    """Asset logic reads the wall clock (`partition_assets.lint.check_wall_clock`); `findings`
    holds each use. The Definitions were not loaded."""

    def __init__(self, message: str, findings: tuple = ()) -> None:
        super().__init__(message)
        self.findings = findings


class ApprovalError(BackfillStateError):
    """A backfill's approval was refused (no approver, expired, needs --force); nothing was published."""


class CapacityConfigError(PartitionAssetsError, ValueError):
    """The backfill capacity in dagster.yaml (`partition_assets: backfills:`) is invalid; nothing was launched."""


class LaunchWindowError(BackfillPlanError):
    """A backfill's `--window` is malformed or names an unknown time zone; nothing was recorded."""


class RecordChangedError(BackfillStateError):
    """Another process changed a backfill's record since this one read it; nothing was written."""


class ApprovalConfigError(PartitionAssetsError, ValueError):
    """The approval setting in dagster.yaml (`partition_assets: approval:`) is invalid; nothing was written."""


class WiringError(PartitionAssetsError, TypeError):
    """A call wiring a project (`partition_assets.definitions`) was given an option it does not
    take, or a code location it cannot find; nothing was built or written."""


class UnknownReleaseError(PartitionAssetsError, LookupError):
    """No release of the lake's release log has that id (storage/release_log.py); nothing was read or written."""


class ReleaseExpiredError(PartitionAssetsError, LookupError):
    """A release names a table version that vacuum or log cleanup has removed; nothing was read or written."""


class RetractError(BackfillPlanError):
    """A retract (`backfill retract`) cannot remove the partitions asked for; nothing was written."""


class NotMaterializedError(RetractError):
    """A partition asked to be retracted was never materialized in the instance: there is nothing to remove."""


class DownstreamReadersError(RetractError):
    """Partitions asked to be retracted are still read by materialized downstream partitions
    (retract them too with --downstream); nothing was written."""


class RunConfigError(BackfillPlanError):
    """A backfill's run config (`--config FILE.yaml`) cannot be read or does not match the config
    schema of its assets; nothing was launched or written."""


class BatchingError(BackfillPlanError):
    """A backfill asks for the engine's batching (`--batching engine`) of assets that have no
    `BackfillPolicy` to batch by; nothing was launched or written."""


class UnguardedScriptError(PartitionAssetsError, RuntimeError):
    """A script runs a backfill's nodes from its top level, outside `if __name__ == "__main__":`
    (its workers import the script again); nothing was run."""


class StoredPlanError(BackfillStateError):
    """A backfill's stored plan no longer matches its code location (an asset it names is gone, or
    its partitions definition lists other keys for a stored range); nothing was written."""


class ExtendError(BackfillStateError):
    """`backfill extend` cannot widen the backfill as asked (a retract, no time range, a range that
    shrinks or does not widen); nothing was written."""
