"""Compare-and-set on the instance's key-value store (dagster_instance/key_values.py), and the
state that goes through it: a coordinator's claim (backfill/state/presence.py) and the list of
freezing backfills (backfill/publishing/freeze.py). Each race is staged: the rival writes
between the claimant's read and its write, where a read-modify-write would lose one of them."""

import dagster as dg
import pytest

from partition_assets.backfill.publishing import freeze
from partition_assets.backfill.state import presence
from partition_assets.backfill.state.presence import Announcement, live_coordinator
from partition_assets.dagster_instance import key_values
from partition_assets.dagster_instance.key_values import swap, value_of
from partition_assets.errors import CoordinatorLiveError
from partition_assets_tests.support.instances import also_on_postgres


@also_on_postgres("home")
def test_a_swap_writes_only_over_the_value_it_expects(home):
    with dg.DagsterInstance.get() as instance:
        assert swap(instance, "k", None, "a")  # absent: inserted
        assert not swap(instance, "k", None, "b")  # present: a second insert loses
        assert not swap(instance, "k", "stale", "c")
        assert value_of(instance, "k") == "a"
        assert swap(instance, "k", "a", "d")
        assert value_of(instance, "k") == "d"
        assert value_of(instance, "absent") is None


def _rival_writes_after_the_first_read(monkeypatch, module, rival_write) -> None:
    """`module`'s reads of the store: the first one returns what it read, after `rival_write` ran."""
    reads = []

    def read_then_rival_writes(instance: dg.DagsterInstance, key: str) -> str | None:
        value = key_values.value_of(instance, key)
        if not reads:
            reads.append(value)
            rival_write()
        return value

    monkeypatch.setattr(module, "value_of", read_then_rival_writes)


@also_on_postgres("home")
def test_a_claim_that_read_before_a_rival_claimed_is_refused_and_leaves_the_rival_s_announcement(home, monkeypatch):
    with dg.DagsterInstance.get() as instance:
        rival = Announcement(instance, "bf1")
        _rival_writes_after_the_first_read(monkeypatch, presence, lambda: rival.claim("run"))
        with pytest.raises(CoordinatorLiveError, match="bf1 has a live coordinator"):
            Announcement(instance, "bf1").claim("publish")
        assert live_coordinator(instance, "bf1").token == rival._token
        rival.release()
        assert live_coordinator(instance, "bf1") is None


@also_on_postgres("home")
def test_a_freeze_that_read_the_list_before_a_rival_s_landed_keeps_both(home, monkeypatch):
    with dg.DagsterInstance.get() as instance:
        rival = lambda: freeze.freeze(instance, [dg.AssetKey("rival")], "bf_rival")  # noqa: E731
        _rival_writes_after_the_first_read(monkeypatch, freeze, rival)
        freeze.freeze(instance, [dg.AssetKey("mine")], "bf_mine")
        monkeypatch.undo()
        assert freeze.frozen_assets(instance) == {dg.AssetKey("rival"): "bf_rival", dg.AssetKey("mine"): "bf_mine"}
