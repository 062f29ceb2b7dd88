"""What a backfill is: one frozen, validated `BackfillSpec`, shared by every surface.

The command line's flags (`add_spec_arguments`), the Launchpad job's config schema
(`spec_config_class`), the backfill record and `plan()` all derive from the fields
below, so a new option is one field with its `option(...)` help plus its check in
`BackfillSpec.__post_init__`.

A spec is checked on its own here: types, signs, a parseable range, options that
contradict. Whether it plans any node needs the code location and the instance:
`plan()` checks that (unknown assets, a range outside every partition, ...).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, time, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Any, get_type_hints

if TYPE_CHECKING:  # the command line's flags import this module; Dagster loads when a command runs
    import dagster as dg

from partition_assets.backfill.model import ApprovalChoice, Batching, InputsAsOf, OnLease, PublishMode, RunsVia
from partition_assets.backfill.planning.gate_rules import parse_override
from partition_assets.backfill.planning.launch_window import LaunchWindow
from partition_assets.backfill.planning.node_run_config import CONFIG_FLAG, run_config_of_files
from partition_assets.errors import BackfillPlanError

# Tags the engine and Dagster set themselves: a user tag must not overwrite them.
RESERVED_TAG_PREFIXES = ("dagster/", "partition_assets/")
SELECTION_EXAMPLES = "e.g. 'key:daily_orders+', 'key:a or key:b', 'group:revenue'"


@dataclass(frozen=True)
class TimeRange:
    """A half-open interval [start, end) of absolute time."""

    start: datetime
    end: datetime


@dataclass(frozen=True)
class _Option:
    """How a spec field appears on the command line and in the job's config."""

    help: str
    flag: str | None = None  # default: --field-name (--no-field-name for a field that defaults to True)
    metavar: str | None = None
    parse: Callable[[list[str]], Any] | None = None  # repeatable flag: its values -> the field's value
    # A second repeatable flag of a `parse` field, each of whose values is one whole item, never
    # split (`--key 'a,b'`: a key holding the comma that `--keys` splits on).
    whole_flag: str | None = None
    whole_help: str | None = None
    config_type: Any = None  # the job's config type, when the field's own type is not one Dagster takes
    # Each surface supplies it its own way (the code location: -m/-f, or the job's own module).
    supplied_by_surface: bool = False
    # The command line's help when it reads otherwise than the config's: shorter, or a --no-... flag.
    flag_help: str | None = None


def option(default: Any = dataclasses.MISSING, *, factory: Callable[[], Any] | None = None, **how: Any) -> Any:
    """A spec field with its user-facing help; see `_Option` for the keywords."""
    metadata = {"option": _Option(**how)}
    if factory is not None:
        return field(default_factory=factory, metadata=metadata)
    return field(default=default, metadata=metadata)


def _parse_pairs(flag: str, form: str, example: str, convert: Callable[[str, str], Any]) -> Callable:
    def parse(values: list[str]) -> dict[str, Any]:
        parsed: dict[str, Any] = {}
        for value in values:
            name, _, rest = value.partition("=")
            if not name or not rest:
                raise BackfillPlanError(f"{flag} {value!r}: write it as {form}, e.g. {example}")
            parsed[name] = convert(value, rest)
        return parsed

    return parse


def _positive_int(value: str, number: str) -> int:
    if not number.isdigit() or int(number) < 1:
        raise BackfillPlanError(f"--asset-limit {value!r}: write it as ASSET=N with N >= 1, e.g. daily_orders=1")
    return int(number)


class _Whole(str):
    """A value of a `whole_flag`: one item as typed, which its field's `parse` does not split."""

    __slots__ = ()


class _AppendWhole(argparse.Action):
    """argparse's append, marking each value `_Whole`."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, value: Any, *_: Any) -> None:
        setattr(namespace, self.dest, [*(getattr(namespace, self.dest, None) or []), _Whole(value)])


def _partition_keys(values: list[str]) -> list[str]:
    """--keys values (each one key or comma-separated keys) and --key values (each one whole key)
    as one list, in order, without repeats."""
    keys = [key for value in values for key in ([value] if isinstance(value, _Whole) else value.split(","))]
    if not all(keys):
        raise BackfillPlanError(
            f"--keys/--key {','.join(values)!r} holds an empty key: write it as --keys k1,k2, or --key KEY per key"
        )
    return [str(key) for key in dict.fromkeys(keys)]


def _key_list(value: str, keys: str) -> list[str]:
    parsed = keys.split(",")
    if not all(parsed):
        raise BackfillPlanError(f"--static {value!r} holds an empty key: write it as DIMENSION=key1,key2")
    return parsed


# Node runs at once when a backfill does not say (the webserver's dialog never does).
DEFAULT_MAX_PARALLEL = 4


@dataclass(frozen=True)
class BackfillSpec:
    """A backfill: which assets, which partitions, how fast, in which mode. Validated on creation.

    Raises:
        BackfillPlanError: A field holds a bad value (an empty selection; a range that is incomplete,
            not ISO 8601 or inverted; a count that is no whole number or below its minimum; an empty
            static filter or key; a reserved tag; an unknown publish mode or way to run; an
            `inputs_as_of` that is neither 'original' nor an ISO time; a `keep_previous` that is no
            duration; an unknown `batching`; a `run_config` that is no mapping), or two fields
            contradict (`keys` with a range, `lookback` or `static`; `exact` with `lookback`;
            `all_partitions` with a range or `keys`; `batching` engine without `batch`).
        GateConfigError: A `gate` override is invalid.
    """

    module: str = option(
        help="the code location: a module name or a .py file",
        supplied_by_surface=True,
    )
    selection: str = option(help=f"Dagster asset selection, {SELECTION_EXAMPLES}", flag="--select")
    start: str | None = option(None, help="first day or time, inclusive (ISO 8601)")
    end: str | None = option(None, help="last day or time, inclusive (ISO 8601)")
    static: Mapping[str, list[str]] = option(
        factory=dict,
        metavar="DIM=a,b",
        help="static keys to include, by dimension name (or asset key of a static asset); repeatable",
        parse=_parse_pairs("--static", "DIMENSION=key1,key2", "region=emea,apac", _key_list),
        config_type=dict[str, list[str]],
    )
    keys: Sequence[str] = option(
        factory=list,
        metavar="K1,K2",
        help="exactly these partition keys instead of a range, e.g. 2024-01-02,2024-01-05 or "
        "'2024-01-02|emea' (a multi key); repeatable",
        flag_help="these keys instead of a range ('d|emea': a multi key); repeatable",
        parse=_partition_keys,
        config_type=list[str],
        whole_flag="--key",
        whole_help="one key, whole (',' included); repeatable",
    )
    all_partitions: bool = option(
        False,
        help="every partition of each selected asset instead of a range (what a schema change that drops, "
        "retypes, renames or splits a column needs)",
    )
    max_parallel: int = option(DEFAULT_MAX_PARALLEL, metavar="N", help="node runs at once")
    asset_limits: Mapping[str, int] = option(
        factory=dict,
        flag="--asset-limit",
        metavar="ASSET=N",
        help="at most N concurrent runs of ASSET; repeatable",
        parse=_parse_pairs("--asset-limit", "ASSET=N", "daily_orders=1", _positive_int),
        config_type=dict[str, int],
    )
    lookback: int = option(0, metavar="N", help="also re-run the N partitions before the range of each time asset")
    exact: bool = option(False, help="only partitions wholly inside the range (no coarser grain, no lookback)")
    downstream: bool = option(False, help="add every downstream (asset, partition) the range reaches")
    batch: bool = option(
        True,
        help="partitions of assets with a BackfillPolicy share runs, as --batching says (the default; --no-batch "
        "runs one partition per run)",
        flag_help="one run per partition, whatever the policy",
    )
    batching: Batching = option(
        Batching.policy,
        metavar="|".join(Batching),
        help="how the partitions of an asset with a BackfillPolicy share runs: policy, as Dagster's backfill "
        "(single_run(): one run per contiguous range; multi_run(n): runs of n partitions, in order); engine: the "
        "engine's own batching of ready partitions, up to the policy's size (assets without a policy run one "
        "partition per run either way)",
    )
    catch_up: bool = option(False, help="only partitions missing or failed in the instance")
    produced_by: str | None = option(
        None,
        metavar="COMMIT|A..B",
        help="only partitions whose latest materialization was made by this commit, or by a commit of the range "
        "A..B (as `git rev-list A..B`): by its git_sha, or by the code version that commit gives the asset",
    )
    stale: bool = option(
        False,
        help="only partitions whose latest materialization has another code version than the asset's, or read "
        "an upstream partition materialized again since, or that were never made",
    )
    history_as_of: int | None = option(
        None,
        metavar="EVENT_ID",
        help="judge --produced-by and --stale by the instance's event log up to this storage id; a recorded "
        "backfill keeps the one it was planned at, so that resuming it plans the same partitions",
    )
    reverse: bool = option(False, help="newest partitions first")
    tags: Mapping[str, str] = option(
        factory=dict,
        flag="--tag",
        metavar="KEY=VALUE",
        help="a tag on every node run, e.g. team=finance; repeatable",
        parse=_parse_pairs("--tag", "KEY=VALUE", "team=finance", lambda value, tag: tag),
        config_type=dict[str, str],
    )
    run_config: Mapping[str, Any] = option(
        factory=dict,
        flag=CONFIG_FLAG,
        metavar="FILE.yaml",
        help="run config for every node run, as Dagster's backfill takes it (e.g. ops: {my_asset: {config: "
        "{factor: 10}}}), checked against the assets' config schemas before anything runs; repeatable, later "
        "files win",
        parse=run_config_of_files,
        config_type=dict[str, Any],
    )
    publish: PublishMode = option(
        PublishMode.staged,
        metavar="|".join(PublishMode),
        help="staged: nodes stage their output and every table is published in one commit after the "
        "validation gate (readers see the old data, then the new); per-node: each run publishes its "
        "own partitions as it finishes (readers see progress, and a mix)",
        flag_help="staged: every table is published in one commit once the nodes succeeded and the gate "
        "passed; per-node: each run publishes its partitions as it ends",
    )
    inputs_as_of: str | None = option(
        None,
        metavar=f"{InputsAsOf.original}|ISO-TIME",
        help="pin the input tables the backfill does not rewrite: 'original' reads each at the version "
        "the partition's original materialization read, an ISO time reads all as of then",
    )
    gate: Sequence[str] = option(
        factory=list,
        metavar="ASSET:RULE=VALUE",
        help="override an asset's validation gate for this backfill, e.g. daily_revenue:rows=0.2; repeatable",
        flag_help="override an asset's validation gate (the checks before publishing), e.g. "
        "daily_revenue:rows=0.2; repeatable",
        parse=list,
        config_type=list[str],
    )

    keep_previous: str | None = option(
        None,
        metavar="DURATION",
        help="keep each published table's previous version readable as <table>__previous for this long "
        "(e.g. 30d, 12h): a Delta table sharing the old files, listed in `backfill status`, spared by vacuum "
        "until it expires and dropped by vacuum after",
    )

    approval: ApprovalChoice | None = option(
        None,
        metavar="|".join(ApprovalChoice),
        help="required: a staged backfill whose gate passes waits (awaiting_approval) until `backfill approve <id> "
        "--by NAME` publishes it; none: it publishes at once; default: required when an asset it writes declares "
        "backfill_approval() in its metadata",
    )
    approval_expires: str | None = option(
        None,
        metavar="DURATION",
        help="discard a backfill still awaiting approval this long after its gate passed (e.g. 24h, 7d)",
    )

    runs_via: RunsVia = option(
        RunsVia.local,
        metavar="|".join(RunsVia),
        help="local: node runs execute in worker processes of the coordinator; launcher: each is submitted "
        "as a Dagster run through the instance's run coordinator and run launcher (Docker, Kubernetes, "
        "ECS ...), the engine still deciding order and throttle",
    )
    window: str | None = option(
        None,
        metavar="HH:MM-HH:MM [ZONE]",
        help="launch node runs only inside this daily window, in a time zone (default UTC), e.g. "
        "'20:00-06:00 Europe/Paris'; runs started inside it finish past its end",
    )
    priority: int = option(
        0,
        help="its claim on the deployment's backfill capacity (dagster.yaml partition_assets.backfills): "
        "running backfills of higher priority are served first, equal ones share evenly",
    )
    on_lease: OnLease = option(
        OnLease.fail,
        metavar="|".join(OnLease),
        help="when partitions it writes are leased by another backfill or run: fail at once (the default), "
        "or wait, queued, until they are free",
    )

    def __post_init__(self) -> None:
        if not isinstance(self.selection, str) or not self.selection.strip():
            raise BackfillPlanError(f"the selection is empty: give --select an asset selection, {SELECTION_EXAMPLES}")
        self.time_range()  # raises on a malformed or inverted range
        for name in ("max_parallel", "lookback"):
            value, least = getattr(self, name), 1 if name == "max_parallel" else 0
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise BackfillPlanError(f"{_user_name(name)} is {value!r}: give a whole number >= {least}")
        for asset, limit in self.asset_limits.items():
            if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
                raise BackfillPlanError(f"asset limit {asset}={limit!r}: give a whole number >= 1, e.g. {asset}=1")
        for dimension, keys in self.static.items():
            if not dimension or not keys or not all(isinstance(k, str) and k for k in keys):
                raise BackfillPlanError(f"static filter {dimension}={keys!r}: give a dimension and non-empty keys")
        reserved = sorted(key for key in self.tags if key.startswith(RESERVED_TAG_PREFIXES))
        if reserved:
            raise BackfillPlanError(f"tags {reserved} use a reserved prefix {RESERVED_TAG_PREFIXES}: rename them")
        self._choose("publish", PublishMode, f"--publish {self.publish!r} is not a mode")
        self._choose("runs_via", RunsVia, f"--runs-via {self.runs_via!r} is not a way to run")
        self._choose("on_lease", OnLease, f"--on-lease {self.on_lease!r} is not a choice")
        self._choose("batching", Batching, f"--batching {self.batching!r} is not a choice")
        if not self.batch and self.batching == Batching.engine:
            raise BackfillPlanError(
                "--no-batch and --batching engine contradict: --no-batch runs one partition per run; drop one of them"
            )
        if not isinstance(self.run_config, Mapping) or not all(isinstance(key, str) for key in self.run_config):
            raise BackfillPlanError(
                f"run config {self.run_config!r} is not a mapping of names: give it as Dagster's run config, "
                "e.g. {'ops': {'my_asset': {'config': {'factor': 10}}}}"
            )
        if self.approval is not None:
            self._choose("approval", ApprovalChoice, f"--approval {self.approval!r} is not a choice")
        if isinstance(self.priority, bool) or not isinstance(self.priority, int):
            raise BackfillPlanError(f"--priority is {self.priority!r}: give a whole number (higher runs first)")
        if self.window is not None:
            self.launch_window()  # raises LaunchWindowError naming the text and the form
        if self.inputs_as_of not in (None, InputsAsOf.original):
            self.pinned_time()  # raises naming the value and the two forms
        if self.keep_previous is not None:
            self.keep_previous_for()  # raises naming the value and the form
        if self.approval_expires is not None:
            self.approval_expires_after()  # raises naming the value and the form
        for text in self.gate:
            parse_override(text)  # raises GateConfigError naming the text and the grammar
        if self.keys:
            self._check_keys()
        if self.all_partitions and (self.keys or self.start is not None or self.end is not None):
            raise BackfillPlanError(
                "--all-partitions and --start/--end or --keys contradict: --all-partitions names every "
                "partition of each selected asset; drop one of them"
            )
        self._check_history_selection()
        if self.exact and self.lookback:
            raise BackfillPlanError(
                f"--exact and --lookback {self.lookback} contradict: exact adds no partition outside the "
                "range; drop one of them"
            )

    def _check_history_selection(self) -> None:
        if self.produced_by is not None:
            first, dots, last = str(self.produced_by).partition("..")
            if not first.strip() or (dots and (not last.strip() or last.startswith("."))):
                raise BackfillPlanError(
                    f"{flag_of('produced_by')} {self.produced_by!r} is neither a commit nor a range: give a commit "
                    "(e.g. 3f2a1c9) or A..B (the commits of B not in A, as `git rev-list A..B`)"
                )
        if self.history_as_of is not None and (self.produced_by is None and not self.stale):
            raise BackfillPlanError(
                f"{flag_of('history_as_of')} judges only {flag_of('produced_by')} or {flag_of('stale')}: "
                "give one of them, or drop it"
            )
        if self.history_as_of is not None and (
            isinstance(self.history_as_of, bool) or not isinstance(self.history_as_of, int) or self.history_as_of < 0
        ):
            raise BackfillPlanError(f"{_user_name('history_as_of')} is {self.history_as_of!r}: give a storage id >= 0")

    def selects_by_history(self) -> bool:
        """Whether the instance's history picks its partitions (`produced_by`, `stale`)."""
        return self.produced_by is not None or self.stale

    def _check_keys(self) -> None:
        if not all(isinstance(key, str) and key for key in self.keys):
            raise BackfillPlanError(f"--keys {list(self.keys)!r} holds an empty key: give partition keys")
        contradicting = [
            flag
            for flag, given in (
                ("--start/--end", self.start is not None or self.end is not None),
                (f"--lookback {self.lookback}", self.lookback > 0),
                ("--static", bool(self.static)),
            )
            if given
        ]
        if contradicting:
            raise BackfillPlanError(
                f"--keys and {', '.join(contradicting)} contradict: --keys names exactly the partitions "
                "(a multi key names its static dimension too, e.g. '2024-01-02|emea'); drop one of them"
            )

    def time_range(self) -> TimeRange | None:
        """The half-open range of the inclusive `start` and `end` (each a day or an instant).

        Returns:
            The range, in UTC where `start` and `end` name no timezone; None when neither is given.

        Raises:
            BackfillPlanError: Only one of `start` and `end` is given, one is not ISO 8601, or
                `start` is after `end`.
        """
        if self.start is None and self.end is None:
            return None
        if self.start is None or self.end is None:
            raise BackfillPlanError("give both --start and --end (inclusive), or neither")
        first, last = _parse_time(self.start), _parse_time(self.end)
        # An end date covers its whole day; an end time, the instant (and so its partition).
        last = last + (timedelta(days=1) if len(self.end) <= 10 else timedelta(microseconds=1))
        if last <= first:
            raise BackfillPlanError(f"--start {self.start} is after --end {self.end}: swap them")
        return TimeRange(first, last)

    def pinned_time(self) -> datetime | None:
        """The time `--inputs-as-of` pins inputs to; None when unpinned or pinned to the originals.

        Raises:
            BackfillPlanError: `inputs_as_of` is neither 'original' nor an ISO time.
        """
        if self.inputs_as_of in (None, InputsAsOf.original):
            return None
        try:
            return _parse_time(self.inputs_as_of)
        except BackfillPlanError:
            raise BackfillPlanError(
                f"--inputs-as-of {self.inputs_as_of!r} is neither {InputsAsOf.original.value!r} nor an ISO time: "
                f"give {InputsAsOf.original} or e.g. 2024-03-01T12:00:00+00:00"
            ) from None

    def launch_window(self) -> LaunchWindow | None:
        """The daily window its nodes launch in; None when it launches at any time.

        Raises:
            LaunchWindowError: `window` is malformed or names an unknown time zone.
        """
        return LaunchWindow.parse(self.window) if self.window is not None else None

    def keep_previous_for(self) -> timedelta | None:
        """How long `--keep-previous` keeps each table's previous version; None when not asked.

        Raises:
            BackfillPlanError: `keep_previous` is not a whole number > 0 followed by d, h or m.
        """
        return _duration("keep_previous", self.keep_previous)

    def approval_expires_after(self) -> timedelta | None:
        """How long the backfill may await approval (`--approval-expires`); None when forever.

        Raises:
            BackfillPlanError: `approval_expires` is not a whole number > 0 followed by d, h or m.
        """
        return _duration("approval_expires", self.approval_expires)

    def describe(self) -> str:
        """One line: the selection and the range."""
        if self.keys:
            shown = ",".join(self.keys[:3]) + (f",... ({len(self.keys)} keys)" if len(self.keys) > 3 else "")
            return f"{self.selection} keys {shown}"
        span = f" {_shown_span(self.start, self.end)}" if self.start else ""
        return f"{self.selection}{span}"

    def _choose(self, name: str, kind: type[StrEnum], refusal: str) -> None:
        """Field `name` as a member of `kind` (a word from the command line, a config or a stored
        record); BackfillPlanError naming the value and the choices when it is none."""
        try:
            object.__setattr__(self, name, kind(getattr(self, name)))
        except ValueError:
            raise BackfillPlanError(f"{refusal}: give one of {', '.join(kind)}") from None

    def to_json(self) -> dict[str, Any]:
        """Every field as plain JSON values (a choice as its word)."""
        return {k: v.value if isinstance(v, StrEnum) else v for k, v in dataclasses.asdict(self).items()}

    @classmethod
    def from_json(cls, values: Mapping[str, Any]) -> BackfillSpec:
        """A spec from `to_json`; fields added since it was written take their defaults.

        Raises:
            BackfillPlanError: A saved field is invalid (see the class).
            GateConfigError: A saved `gate` override is invalid.
        """
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{name: value for name, value in values.items() if name in known})


def _duration(name: str, value: str | None) -> timedelta | None:
    """The spec field `name`'s duration `value` (e.g. 30d, 12h, 90m); None when not given."""
    if value is None:
        return None
    text = str(value).strip()
    unit = {"d": "days", "h": "hours", "m": "minutes"}.get(text[-1:])
    if unit is None or not text[:-1].isdigit() or int(text[:-1]) < 1:
        raise BackfillPlanError(
            f"{flag_of(name)} {value!r} is not a duration: give a whole number > 0 followed by d, h or m, e.g. 30d"
        )
    return timedelta(**{unit: int(text[:-1])})


def _shown_span(start: str, end: str | None) -> str:
    """`start..end` for people: as days (`2024-01-04..2024-01-06`) when they are the first and
    the last instant of days, as the webserver's launch of whole days is recorded
    (`2024-01-04T00:00:00+00:00..2024-01-06T23:59:59.999999+00:00`); else as given."""
    try:
        first, last = datetime.fromisoformat(start), datetime.fromisoformat(end or "")
    except ValueError:
        return f"{start}..{end}"
    if first.time() == time.min and last.time() == time.max and first.tzinfo == last.tzinfo:
        return f"{first.date()}..{last.date()}"
    return f"{start}..{end}"


def _parse_time(value: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        raise BackfillPlanError(f"{value!r} is not an ISO date or time, e.g. 2024-01-31 or 2024-01-31T13:00") from None
    if len(value) <= 10:
        parsed = datetime.combine(parsed.date(), time())
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _options() -> list[tuple[dataclasses.Field, _Option]]:
    return [(f, f.metadata["option"]) for f in dataclasses.fields(BackfillSpec)]


def _type_of(spec_field: dataclasses.Field) -> Any:
    return _spec_types()[spec_field.name]


@functools.cache
def _spec_types() -> dict[str, Any]:
    """BackfillSpec's field types, evaluated once: evaluating its annotations (strings under
    `from __future__ import annotations`) per field took ~0.1 s of every command's start-up."""
    return get_type_hints(BackfillSpec)


def _flag(spec_field: dataclasses.Field, how: _Option) -> str:
    if how.flag:
        return how.flag
    dashed = spec_field.name.replace("_", "-")
    return f"--no-{dashed}" if spec_field.default is True else f"--{dashed}"


# How a surface names a spec field in the messages it shows: `flag_of` on the command line,
# `config_key_of` for the job's config (and a UI backfill, whose spec the engine derives).
Wording = Callable[[str], str]


def flag_of(name: str) -> str:
    """The command line's name for spec field `name`: its flag, e.g. --static."""
    spec_field = next(f for f, _ in _options() if f.name == name)
    return _flag(spec_field, spec_field.metadata["option"])


def config_key_of(name: str) -> str:
    """The Launchpad job's name for spec field `name`: its config key, the field's own name."""
    return name


def _user_name(name: str) -> str:
    return f"{name} ({flag_of(name)})"


def add_spec_arguments(
    parser: argparse.ArgumentParser,
    only: Sequence[str] | None = None,
    group_of: Callable[[str], argparse._ActionsContainer] | None = None,
) -> None:
    """One flag per spec field (except the code location, which the caller adds); of the
    fields named `only` when given (a command that takes some of a spec's fields). Each flag
    goes in the help's group `group_of(field name)` when given; its help states its default."""
    for spec_field, how in _options():
        if how.supplied_by_surface or (only is not None and spec_field.name not in only):
            continue
        flag, where = _flag(spec_field, how), group_of(spec_field.name) if group_of else parser
        shown = how.flag_help or how.help
        if _type_of(spec_field) is bool:
            action = "store_false" if spec_field.default is True else "store_true"
            where.add_argument(flag, dest=spec_field.name, action=action, help=shown)
        elif how.parse is not None:
            where.add_argument(flag, dest=spec_field.name, action="append", default=[], metavar=how.metavar, help=shown)
            if how.whole_flag is not None:
                where.add_argument(
                    how.whole_flag, dest=spec_field.name, action=_AppendWhole, metavar="KEY", help=how.whole_help
                )
        else:
            required = spec_field.default is dataclasses.MISSING
            where.add_argument(
                flag,
                dest=spec_field.name,
                required=required,
                metavar=how.metavar,
                type=int if _type_of(spec_field) in (int, int | None) else str,
                default=None if required else spec_field.default,
                help=shown if required else _with_default(shown, spec_field.default),
            )


def _with_default(help_text: str, default: Any) -> str:
    """A flag's help ending with its default, unless it names one already or has none to name."""
    if default is None or "default" in help_text:
        return help_text
    return f"{help_text} (default: {default.value if isinstance(default, StrEnum) else default})"


def spec_from_arguments(args: argparse.Namespace, module: str) -> BackfillSpec:
    """The spec of parsed `add_spec_arguments` flags; raises BackfillPlanError naming a bad value.

    Args:
        module: The code location (a module name or a .py file), which the caller's own flag names.

    Raises:
        BackfillPlanError: A repeatable flag's value is malformed (e.g. `--tag` without `=`), or
            the spec is invalid (see `BackfillSpec`).
        GateConfigError: A `--gate` override is invalid.
    """
    values: dict[str, Any] = {"module": module}
    for spec_field, how in _options():
        if not how.supplied_by_surface and hasattr(args, spec_field.name):  # the flags it was given (`only`)
            value = getattr(args, spec_field.name)
            values[spec_field.name] = how.parse(value) if how.parse is not None else value
    return BackfillSpec(**values)


def spec_config_class() -> type[dg.Config]:
    """The Launchpad job's config: every spec field but the code location, which the job names."""
    import dagster as dg
    from pydantic import Field, create_model

    fields: dict[str, Any] = {}
    for spec_field, how in _options():
        if how.supplied_by_surface:
            continue
        kind = how.config_type or _type_of(spec_field)
        if spec_field.default is not dataclasses.MISSING:
            default = Field(default=spec_field.default, description=how.help)
        elif spec_field.default_factory is not dataclasses.MISSING:
            default = Field(default_factory=spec_field.default_factory, description=how.help)
        else:
            default = Field(description=how.help)
        fields[spec_field.name] = (kind, default)
    config = create_model("SparseBackfillConfig", __base__=dg.Config, **fields)
    config.__doc__ = "A backfill's parameters, as `partition-assets backfill run` takes them."
    return config


def spec_from_config(config: dg.Config, module: str) -> BackfillSpec:
    """The spec of a job run's config; raises BackfillPlanError naming a bad value.

    Args:
        module: The code location the job's node runs load (a module name or a .py file).

    Raises:
        BackfillPlanError: The spec is invalid (see `BackfillSpec`).
        GateConfigError: A `gate` override is invalid.
    """
    return BackfillSpec(module=module, **config.model_dump())
