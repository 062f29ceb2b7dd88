"""Dagster's partition mappings asked each distinct question once per plan.

A plan over thousands of assets asks the same questions again and again: a platform's
tables share a few partitions definitions and mappings (daily tables reading daily parents
by identity, or a multi-partitioned table by one dimension), so the same upstream keys map
to the same downstream keys for hundreds of edges, and each key of a multi-partitioned
asset to the same parent keys. Dagster's multi-dimension mappings cost about a millisecond
a call. `MappingMemo` keeps each answer by (mapping, definitions, keys): partition
definitions and mappings are values (equal objects answer alike), so an answer holds for
every edge that asks it again. It also holds the plan's `PartitionOrder` (keys.py).

Contract: each answer equals Dagster's own for the same arguments, computed on first ask.

Not guaranteed: dynamic partitions are read when a question is first asked; one added
while the plan is made may be missed by later answers (a plan is a snapshot anyway).
Memory grows with the distinct questions of one plan; a memo lives as long as its plan.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar, cast

import dagster as dg

from partition_assets.backfill.planning.keys import UNPARTITIONED, PartitionOrder

if TYPE_CHECKING:
    from partition_assets.dagster_internals import DynamicPartitionsStore, PartitionsSubset

T = TypeVar("T")


class MappingMemo:
    """The answers of Dagster's partition mappings within one plan (see the module)."""

    def __init__(self, store: DynamicPartitionsStore | None) -> None:
        self.store = store
        self.order = PartitionOrder(store)
        self._downstream: dict[tuple, frozenset[str]] = {}
        self._upstream: dict[tuple, tuple[str, ...]] = {}
        self._nonexistent: dict[tuple, tuple[str, ...]] = {}

    def downstream_keys(
        self,
        mapping: dg.PartitionMapping,
        upstream_def: dg.PartitionsDefinition | None,
        upstream_keys: Sequence[str],
        downstream_def: dg.PartitionsDefinition | None,
    ) -> frozenset[str]:
        """The partitions of a `downstream_def` asset that read `upstream_keys` through `mapping`:
        every one when the upstream asset is unpartitioned; UNPARTITIONED for an unpartitioned reader."""
        if downstream_def is None:
            return frozenset({UNPARTITIONED})
        if upstream_def is None:  # an unpartitioned input feeds every partition
            return frozenset(downstream_def.get_partition_keys(dynamic_partitions_store=self.store))

        def ask() -> frozenset[str]:
            reached = mapping.get_downstream_partitions_for_partitions(
                upstream_def.subset_with_partition_keys(upstream_keys),
                upstream_def,
                downstream_def,
                dynamic_partitions_store=self.store,
            )
            return frozenset(reached.get_partition_keys())

        return _remembered(self._downstream, (mapping, upstream_def, downstream_def, tuple(upstream_keys)), ask)

    def upstream_keys(
        self,
        mapping: dg.PartitionMapping,
        downstream_def: dg.PartitionsDefinition | None,
        key: str,
        upstream_def: dg.PartitionsDefinition | None,
    ) -> tuple[str, ...]:
        """The partitions of an `upstream_def` asset that partition `key` of a `downstream_def`
        asset reads through `mapping` (UNPARTITIONED for an unpartitioned upstream)."""
        if upstream_def is None:
            return (UNPARTITIONED,)

        def ask() -> tuple[str, ...]:
            subset = None if downstream_def is None else downstream_def.empty_subset().with_partition_keys([key])
            result = mapping.get_upstream_mapped_partitions_result_for_partitions(
                subset, downstream_def, upstream_def, dynamic_partitions_store=self.store
            )
            return tuple(result.partitions_subset.get_partition_keys())

        return _remembered(self._upstream, (mapping, downstream_def, key, upstream_def), ask)

    def nonexistent_upstream_keys(
        self,
        mapping: dg.PartitionMapping,
        downstream_def: dg.PartitionsDefinition | None,
        keys: Sequence[str],
        upstream_def: dg.PartitionsDefinition,
    ) -> tuple[str, ...]:
        """The partitions `upstream_def` lacks that `keys` (in partition order) of a
        `downstream_def` asset read through `mapping`: its `required_but_nonexistent_subset`,
        empty when the mapping allows them (`allow_nonexistent_upstream_partitions`). Time
        partitions are asked as one span, keys[0] to keys[-1]: every window between them too
        (a superset when `keys` skip some), as one range rather than a key each."""
        spans = isinstance(downstream_def, dg.TimeWindowPartitionsDefinition)

        def ask() -> tuple[str, ...]:
            subset: PartitionsSubset | None = None  # an unpartitioned reader's
            if spans:  # one window: no key is listed or parsed but the two ends
                time_def = cast(dg.TimeWindowPartitionsDefinition, downstream_def)
                subset = time_def.get_partition_subset_in_time_window(
                    dg.TimeWindow(
                        time_def.time_window_for_partition_key(keys[0]).start,
                        time_def.time_window_for_partition_key(keys[-1]).end,
                    )
                )
            elif downstream_def is not None:
                subset = downstream_def.empty_subset().with_partition_keys(keys)
            result = mapping.get_upstream_mapped_partitions_result_for_partitions(
                subset, downstream_def, upstream_def, dynamic_partitions_store=self.store
            )
            return tuple(result.required_but_nonexistent_subset.get_partition_keys())

        asked = (keys[0], keys[-1]) if spans else tuple(keys)
        return _remembered(self._nonexistent, (mapping, downstream_def, asked, upstream_def), ask)


def _remembered(answers: dict[tuple, T], question: tuple, ask: Callable[[], T]) -> T:
    """`answers[question]`, asked once; asked every time when the question cannot be a key (a
    custom mapping or definition that is not hashable)."""
    try:
        if question not in answers:
            answers[question] = ask()
        return answers[question]
    except TypeError as error:
        if "unhashable" not in str(error):
            raise
        return ask()
