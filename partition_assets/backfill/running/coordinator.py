"""Runs a recorded backfill: launches its nodes, honours cancel, then gates and publishes it.

Shared by every surface that starts a backfill (the CLI, a Dagster job, a sensor, the
webserver's standby), so each behaves the same and leaves the same record. One
`BackfillRun` is one run of one backfill by this process: it holds the instance (passed
in by the surface, never fetched here), the record, the graph and the runner.
"""

import logging
from collections.abc import Callable, Collection, Iterator, Mapping
from collections.abc import Set as AbstractSet
from concurrent.futures import Future
from contextlib import ExitStack, contextmanager

import dagster as dg

from partition_assets.backfill.model import (
    BackfillCommand,
    BackfillStatus,
    Batching,
    Node,
    NodeResult,
    NodeStatus,
    PublishMode,
    RunUnit,
)
from partition_assets.backfill.planning.graph import BackfillGraph
from partition_assets.backfill.publishing.approval_steps import check_launch
from partition_assets.backfill.publishing.backfill_stats import TableStats
from partition_assets.backfill.publishing.dagster_events import record_failures
from partition_assets.backfill.publishing.notify import EventKind
from partition_assets.backfill.publishing.originals import (
    Pins,
    break_runs_between_pins,
    originals,
    pin_inputs,
    pins_from_json,
    pins_to_json,
    runtime_warnings,
)
from partition_assets.backfill.publishing.provenance import provenance_to_json
from partition_assets.backfill.publishing.publication import Publication, staged_publication
from partition_assets.backfill.publishing.stages import (
    PublishInputs,
    PublishStage,
    published_line,
    start_after_nodes,
    walk_after_nodes,
)
from partition_assets.backfill.publishing.tables import unstaged_assets
from partition_assets.backfill.running.claims import LaunchGate, asset_pools, capacity_of
from partition_assets.backfill.running.dagster_view import HIDDEN, DagsterView
from partition_assets.backfill.running.durations import recorded_seconds
from partition_assets.backfill.running.loop import execute
from partition_assets.backfill.running.runners import NodeRunner, RunnerFactory, node_runner
from partition_assets.backfill.running.scheduling import Throttle
from partition_assets.backfill.state.record import BackfillRecord, cancel_in_flight, skipped_as_current
from partition_assets.backfill.state.status import check_transition
from partition_assets.code_location import load_definitions
from partition_assets.dagster_instance.storage import (
    DATABASE_OUTAGE_SECONDS,
    DATABASE_OUTAGE_SECONDS_ENV,
    riding_out_database_restarts,
)
from partition_assets.deploy.runtime import runtime_versions
from partition_assets.errors import (
    CommitError,
    DatabaseUnreachableError,
    IllegalTransitionError,
    PartitionAssetsError,
    SparkServerGoneError,
)
from partition_assets.run_tags import RECORDED_AS_RUN, node_run_tags, pinned_input_tags
from partition_assets.settings import positive_seconds
from partition_assets.storage.leases import Lease, park, release

_log = logging.getLogger(__name__)


class BackfillRun:
    """One run of the backfill `record` over `graph` in `instance`, leaving the `done`
    nodes alone: `run()` runs every other node, holding leases on the partitions it writes
    and its assets frozen, and stops launching once the record is canceled (or its Dagster
    backfill is canceled in the UI). It launches only what its `LaunchGate` allows: nothing
    while paused or outside its window, and within the deployment's backfill capacity
    (backfill/running/claims.py). Its `dagster_view` (running/dagster_view.py; every surface
    passes the webserver's, backfill/dagster_ui/view.py) shows its status and per-partition
    progress as the Dagster backfill of the same id, and its gate's evaluations as asset checks.
    `on_launch` sees each run unit as it launches, `on_result` each node's result, `on_phase`
    a line per step after the nodes (the gate, the publish); `runner_of` makes what runs the
    nodes (bench/scale_bench.py passes one whose runs finish at once, to measure everything
    else).

    Nodes that failed, and those it left blocked behind them, read failed in Dagster's
    partition status, as Dagster's failed runs leave their steps, never materialized
    (backfill/publishing/dagster_events.py `record_failures`), staged or per node.

    A staged backfill (the default) then hands the publishing stages to their runner, once
    (backfill/publishing/stages.py: its gate, approval, one commit per table, the release,
    Dagster's records, the ledger, the notification, the status); a failed gate raises
    GateFailedError with nothing published; one whose spec or assets require approval waits
    in `awaiting_approval` instead of publishing (backfill/publishing/approval_steps.py). One
    that was publishing when its coordinator died only finishes publishing, from the first stage
    its record says was not finished (as does one whose coordinator died after its nodes, before
    publishing). With `--inputs-as-of`, each node reads the input versions pinned on the first
    start (backfill/publishing/originals.py).

    A run the backfill's status refuses (one awaiting approval, published, discarded) is
    refused with IllegalTransitionError before any worker starts or lease is taken: it
    changes nothing. Once its leases are taken, every way out leaves a status of the
    table (status.py) and the leases as that status requires: an error or interrupt in
    any phase fails a running (or paused) backfill; a staged one's leases are then parked,
    a per-node one's released (released too once it is published or done). A Spark
    Connect server that stopped listening meanwhile fails it with SparkServerGoneError,
    naming the server. A restart of the instance's database server is ridden out: its calls
    wait for it (dagster_instance/storage.py `riding_out_database_restarts`, up to
    PARTITION_ASSETS_DATABASE_OUTAGE_SECONDS), logging when it went and came back; a server
    away longer stops it with DatabaseUnreachableError, naming the `resume` that goes on (its
    leases as a failure leaves them; its status failed if the server answers by then, else left
    running, its coordinator silent once the process is gone).

    Not guaranteed: a coordinator killed (SIGKILL, a lost machine) runs none of this: its
    leases expire with their heartbeat and its backfill shows as silent
    (backfill/state/liveness.py) until `backfill resume` takes it over.
    """

    def __init__(
        self,
        instance: dg.DagsterInstance,
        record: BackfillRecord,
        graph: BackfillGraph,
        done: AbstractSet[Node],
        runner_of: RunnerFactory = node_runner,
        on_result: Callable[[NodeResult], None] = lambda result: None,
        on_phase: Callable[[str], None] = lambda line: None,
        on_launch: Callable[[RunUnit], None] = lambda unit: None,
        dagster_view: DagsterView = HIDDEN,
    ) -> None:
        self.instance = instance
        self.record = record
        self.graph = graph
        self.done = done
        self.staged = record.spec.publish == PublishMode.staged
        self._runner_of = runner_of
        self._on_result = on_result
        self._on_phase = on_phase
        self._on_launch = on_launch
        self._dagster_view = dagster_view

    def run(self) -> dict[Node, NodeStatus]:
        """Runs the backfill (see the class docstring); the status of each node it ran.

        Raises:
            IllegalTransitionError: Its status refuses a run (see the class docstring); nothing was changed.
            SparkServerGoneError: Its Spark Connect server stopped listening; it failed, its leases parked.
            DatabaseUnreachableError: The instance's database stayed unreachable past the window; it stopped.
            EnvironmentSetupError: PARTITION_ASSETS_DATABASE_OUTAGE_SECONDS is not a positive number; nothing was run.
        """
        check_transition(self.record.id, self.record.status, self._entering, BackfillCommand.RUN)
        outage_window = positive_seconds(DATABASE_OUTAGE_SECONDS_ENV, DATABASE_OUTAGE_SECONDS)
        try:
            # A restart of the instance's database server is waited out, not a failure.
            with riding_out_database_restarts(outage_window):
                return self._run_checked()
        except DatabaseUnreachableError as error:  # from the run, or from a cleanup after it
            raise DatabaseUnreachableError(
                f"backfill {self.record.id} stopped: {error}. {self._leases_left()}. Once the database answers, "
                f"`partition-assets backfill resume {self.record.id}` goes on."
            ) from error

    def _run_checked(self) -> dict[Node, NodeStatus]:
        with ExitStack() as stack:
            # Workers start loading the code location now, while the coordinator prepares.
            runner = stack.enter_context(self._runner()) if self.record.status != BackfillStatus.PUBLISHING else None
            definitions = load_definitions(self.record.spec.module)
            # The deployment's backfill capacity, refused when invalid before anything is recorded.
            capacity = capacity_of(self.instance)
            pools = asset_pools(definitions.resolve_asset_graph())
            capacity.check_pools(set(pools.values()) | set(self.instance.event_log_storage.get_concurrency_keys()))
            self._launch_gate = LaunchGate(self.instance, self.record, capacity, pools)
            publication = staged_publication(self.record, definitions, self.graph)
            if self.record.status != BackfillStatus.PUBLISHING:  # one publishing was approved, or needed none
                check_launch(publication, self.instance)  # before anything is recorded or run
            if self.staged:
                self._check_staging(publication)
            return self._run_held(publication, runner)

    def _check_staging(self, publication: Publication) -> None:
        """Refuses a format that cannot publish at once, before any run; warns about assets
        that other IO managers write as their nodes run (their node runs record them) when
        the backfill also holds tables back until it publishes: only then are some of its
        assets seen before others. A backfill with no table to stage writes every asset as
        Dagster's runs do, which its last line says (`published: no tables`)."""
        for table in publication.tables.values():
            table.check_stageable(keep_previous=self.record.spec.keep_previous is not None)
        unstaged = unstaged_assets(publication.definitions, self.graph)
        if unstaged and publication.tables:
            _log.warning(
                "backfill %s: %s are stored by other IO managers, which write them as their nodes run: "
                "readers see those before the backfill publishes, and each node run records its materialization "
                "as Dagster's runs do (a rollback or discard leaves them as written)",
                self.record.id,
                ", ".join(key.to_user_string() for key in unstaged),
            )

    @property
    def _entering(self) -> BackfillStatus:
        """The status this run moves the backfill to: publishing when its coordinator died publishing."""
        return BackfillStatus.PUBLISHING if self.record.status == BackfillStatus.PUBLISHING else BackfillStatus.RUNNING

    def _run_held(self, publication: Publication, runner: NodeRunner | None) -> dict[Node, NodeStatus]:
        record = self.record
        entered = record.status
        pins = {} if entered == BackfillStatus.PUBLISHING else self._pins_of_rerun(publication.definitions)
        asset_graph = publication.definitions.resolve_asset_graph()
        with (
            publication.held(self.instance, entering=self._entering) as leases,
            self._settled_on_any_exit(publication, leases),
            # Once its leases are taken: a backfill refused for leased partitions shows in no list.
            self._dagster_view.mirror(record, self.graph, asset_graph, self.instance, self.done) as mirror,
        ):
            # Decided before any node stages new data: the stage its publishing starts at.
            nodes_left = any(node not in self.done for node in self.graph.nodes())
            start = start_after_nodes(record, entered, nodes_left) if self.staged else None
            if runner is None:  # its coordinator died publishing: only the publish is left
                self._publish(publication, leases, start)
                return {}
            publication.notify("started", record.spec.describe())
            ahead = publication.stats_ahead(self.done) if self.staged else None

            def node_finished(result: NodeResult) -> None:
                if ahead is not None:
                    ahead.finished(result)
                mirror.finished(result)
                self._on_result(result)

            try:
                unstaged = set(unstaged_assets(publication.definitions, self.graph)) if self.staged else set()
                status = self._run_nodes(runner, node_finished, mirror.launched, pins, unstaged)
                mirror.settle(status)
                ahead_stats = ahead.results() if ahead is not None and _all_succeeded(status) else None
            finally:
                if ahead is not None:
                    ahead.close()
            record_failures(self.instance, record.id, self.graph, status)  # as Dagster's failed runs leave them
            if self._stopped_by_command():
                self._stop(publication, leases, "canceled", "")
            elif not _all_succeeded(status):
                if record.move_unless_canceled(BackfillStatus.FAILED, BackfillCommand.COORDINATE):
                    self._stop(publication, leases, "failed", "nodes failed: nothing was published")
                    self._raise_if_spark_gone(publication, "its node runs failed")
                else:
                    self._stop(publication, leases, "canceled", "")
            elif not self.staged:
                if record.move_unless_canceled(BackfillStatus.DONE, BackfillCommand.COORDINATE):
                    release(leases)
                else:
                    self._stop(publication, leases, "canceled", "")
            else:
                skipped = [node for node, state in status.items() if state == NodeStatus.SKIPPED]
                self._publish(publication, leases, start, ahead_stats, skipped)
        return status

    def _publish(
        self,
        publication: Publication,
        leases: list[Lease],
        start: str | None,
        ahead_stats: Mapping[dg.AssetKey, TableStats | None] | None = None,
        skipped: Collection[Node] = (),
    ) -> None:
        """Hands the publishing stages (backfill/publishing/stages.py) to their runner once, from
        `start`: the gate (evaluated on `ahead_stats` where computed, the ledger naming the
        `skipped` nodes), the approval, the commits and what follows; what each stage leaves
        when it stops the backfill is the stage's. A publish stopped by a cancel after the last
        check publishes nothing; a commit refused (by a foreign commit, the storage) keeps the
        partitions leased (parked) for the `publish --force`, discard or rollback to come."""
        inputs = PublishInputs(
            publication,
            self.instance,
            leases,
            ahead=ahead_stats,
            skipped=skipped,
            on_gate=lambda outcome: self._dagster_view.record_gate(self.record, self.instance, outcome),
            on_phase=self._on_phase,
        )
        try:
            walked = walk_after_nodes(inputs, start)
        except IllegalTransitionError:
            if self.record.stored_status() != BackfillStatus.CANCELED:
                raise
            self._stop(publication, leases, "canceled", "")  # canceled after the last check: nothing published
            return
        except CommitError as error:
            if self.record.publish_stage not in (None, PublishStage.GATE):  # a stage from the commits on
                self._stop(publication, leases, "failed", str(error))
            raise
        if walked is not None and walked.finished:
            self._on_phase(published_line(self.record, walked))

    def _stop(self, publication: Publication, leases: list[Lease], kind: EventKind, detail: str) -> None:
        """A backfill that stops short of publishing: a staged one keeps its partitions
        leased (parked) until it is published, resumed or discarded; one publishing per
        node lets them go."""
        if self.staged:
            park(leases)
        else:
            release(leases)
        publication.notify(kind, detail)

    @contextmanager
    def _settled_on_any_exit(self, publication: Publication, leases: list[Lease]) -> Iterator[None]:
        """However the block ends early (any error, an interrupt), the backfill is left in a
        status of the table with its leases as that status requires (see the class
        docstring), then the error goes on; an unexpected one whose cause is a Spark
        server that stopped listening goes on as SparkServerGoneError."""
        try:
            yield
        except DatabaseUnreachableError as error:  # `run` names the resume
            try:
                self._settle(publication, leases, error)
            except DatabaseUnreachableError:  # still away: the status stays, its coordinator shows silent
                publication.settle_leases(leases)
            raise
        except BaseException as error:
            self._settle(publication, leases, error)
            # A Spark error the coordinator's own SparkResource named already (a session started on
            # a gone server) is told as the backfill's, with what it leaves and the resume.
            spark_error = error.__cause__ if isinstance(error, SparkServerGoneError) else error
            if isinstance(spark_error, Exception) and not isinstance(spark_error, PartitionAssetsError):
                self._raise_if_spark_gone(publication, f"{type(spark_error).__name__}: {spark_error}", error)
            raise

    def _settle(self, publication: Publication, leases: list[Lease], error: BaseException) -> None:
        """What `_settled_on_any_exit` leaves after `error`: a running (or paused) backfill
        failed (a cancel that got there first stands), then its leases released when it is
        final or published per node, else parked. A status the coordinator set already
        (gate_failed, publish_refused, publishing, ...) stays, as do leases it parked."""
        if self.record.stored_status() in (
            BackfillStatus.RUNNING,
            BackfillStatus.PAUSED,
        ) and self.record.move_unless_canceled(BackfillStatus.FAILED, BackfillCommand.COORDINATE):
            _log.error("backfill %s failed: %s: %s", self.record.id, type(error).__name__, error)
            publication.notify("failed", f"{type(error).__name__}: {error}")
        publication.settle_leases(leases)

    def _raise_if_spark_gone(self, publication: Publication, what: str, cause: BaseException | None = None) -> None:
        """SparkServerGoneError when a Spark server of the backfill's tables no longer listens."""
        url = publication.gone_spark_server()
        if url is None:
            return
        backfill_id = self.record.id
        raise SparkServerGoneError(
            f"backfill {backfill_id} {self.record.status.value}: the Spark server at {url} is gone (nothing listens "
            f"there; {what}). {self._leases_left()}. Start the server again (or point the code location at one that "
            f"runs), then `partition-assets backfill resume {backfill_id}`."
        ) from cause

    def _leases_left(self) -> str:
        """What a backfill stopped short of publishing left of its partitions."""
        if self.staged:
            return "Its partitions stay leased (parked) and nothing was published"
        return "Its leases were released; the nodes that succeeded are published"

    def _stopped_by_command(self) -> bool:
        """Whether `backfill cancel` (or a cancel in the UI) stopped the backfill: read again
        from the store, which other processes change."""
        return self.record.stored_status() == BackfillStatus.CANCELED

    def _pins_of_rerun(self, definitions: dg.Definitions) -> dict[Node, Pins]:
        """The input versions each node reads (decided on the backfill's first start, then
        kept in its record), after warning about partitions written on another runtime. A
        staged backfill's record also keeps, from its first start, what made its partitions'
        content (provenance.py): what its rollback restores."""
        record = self.record
        current = skipped_as_current(record, self.graph)  # --catch-up's current nodes: never run, never pinned
        found = originals(self.instance, self.graph, current)
        for line in runtime_warnings(found, runtime_versions()):
            _log.warning("backfill %s: %s", record.id, line)
        if self.staged and record.restored_provenance is None:  # before any publish replaces them
            record.restored_provenance = provenance_to_json(found)
        if record.pinned_inputs is None and record.spec.inputs_as_of is not None:
            record.pinned_inputs = pins_to_json(pin_inputs(record.spec, definitions, self.graph, found))
        pins = pins_from_json(record.pinned_inputs or {})
        break_runs_between_pins(self.graph, pins)
        return pins

    @contextmanager
    def _runner(self) -> Iterator[NodeRunner]:
        """What launches the backfill's runs (`runner_of`: by default local workers, or the
        instance's run launcher with `--runs-via launcher`). `_run_nodes` stops it once the
        nodes are done; whatever is left on exit is killed: the idle workers of a backfill
        refused before its nodes started (it may not even be recorded)."""
        spec = self.record.spec
        tags = {**spec.tags, **node_run_tags(self.record.id, self.staged)}
        runner = self._runner_of(spec, tags, self.instance)
        try:
            yield runner
        finally:
            runner.terminate()

    def _run_nodes(
        self,
        runner: NodeRunner,
        on_result: Callable[[NodeResult], None],
        on_launch: Callable[[RunUnit], None],
        pins: Mapping[Node, Pins],
        unstaged: set[dg.AssetKey],
    ) -> dict[Node, NodeStatus]:
        """Runs the nodes; those of `unstaged` assets (their IO manager writes as they run: no
        staging holds them back) record their materializations and check results in their own
        runs, as Dagster's runs do, whatever the backfill's outcome."""
        record = self.record
        record.move_to(BackfillStatus.RUNNING, BackfillCommand.RUN)
        spec = record.spec

        def launch(unit: RunUnit) -> Future:
            on_launch(unit)
            self._on_launch(unit)
            # Pins differ only between units (break_runs_between_pins): the first member speaks for all.
            as_of = spec.inputs_as_of
            tags = pinned_input_tags(as_of, pins.get(unit.nodes[0], {})) if as_of else {}
            return runner.launch(unit, {**tags, **RECORDED_AS_RUN} if unit.asset in unstaged else tags)

        try:
            throttle = Throttle(
                spec.max_parallel,
                {dg.AssetKey.from_user_string(asset): limit for asset, limit in spec.asset_limits.items()},
            )
            return execute(
                self.graph,
                launch,
                throttle,
                done=self.done,
                on_result=on_result,
                newest_first=spec.reverse,
                should_stop=self._stopped_by_command,
                batch_chains=spec.batch,
                policy_chunks=spec.batching == Batching.policy,
                allowance=self._launch_gate.allowance,
                pools=self._launch_gate.pools,
                durations=recorded_seconds(self.instance, self.graph),
            )
        finally:  # the workers' memory is free before the gate and the publish
            self._stop_runner(runner)

    def _stop_runner(self, runner: NodeRunner) -> None:
        """A canceled backfill's runs in flight are stopped and marked canceled; otherwise
        they are waited for. Stopping a stopped runner does nothing more."""
        if self._stopped_by_command():
            runner.terminate()
            cancel_in_flight(self.instance, self.record.id)
        else:
            runner.close()


def _all_succeeded(status: Mapping[Node, NodeStatus]) -> bool:
    """Whether every node succeeded or was skipped (Dagster's run succeeds with skipped steps)."""
    return all(state in (NodeStatus.SUCCEEDED, NodeStatus.SKIPPED) for state in status.values())
