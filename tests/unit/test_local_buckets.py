"""The rate limiter's in-process buckets (a service without Redis): the same refill and take as
the Redis script, marks that expire, and idle buckets dropped so new addresses cannot grow the
table without bound."""

from __future__ import annotations

import pytest

from pipeline.api.local_buckets import PRUNE_EVERY, LocalBuckets


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_bucket_gives_its_burst_then_waits_for_the_refill() -> None:
    clock = Clock()
    buckets = LocalBuckets(rate=2.0, burst=3, clock=clock)

    taken = [buckets.spend("k", 1) for _ in range(4)]
    clock.now += 0.5  # one token back at 2 a second
    after = buckets.spend("k", 1)

    assert [allowed for allowed, _ in taken] == [True, True, True, False]
    assert taken[3][1] == pytest.approx(0.5)
    assert after == (True, 0.0)
    assert buckets.spend("other", 1)[0]  # each bucket is its own


def test_a_look_costs_nothing() -> None:
    buckets = LocalBuckets(rate=1.0, burst=1, clock=Clock())

    assert [buckets.spend("k", 0)[0] for _ in range(3)] == [True, True, True]


def test_a_mark_expires() -> None:
    clock = Clock()
    buckets = LocalBuckets(rate=1.0, burst=1, clock=clock)
    buckets.mark("fingerprint", 10)

    assert buckets.marked("fingerprint")
    clock.now += 11
    assert not buckets.marked("fingerprint")
    buckets.mark("again", 10)
    buckets.unmark("again")
    assert not buckets.marked("again")


def test_idle_refilled_buckets_are_dropped() -> None:
    clock = Clock()
    buckets = LocalBuckets(rate=1.0, burst=2, clock=clock)
    buckets.spend("busy", 1)
    clock.now += 5  # longer than a refill from empty (2 s): "busy" is full again
    for address in range(PRUNE_EVERY):
        buckets.spend(f"address-{address}", 1)

    assert "busy" not in buckets.buckets
    assert len(buckets.buckets) <= PRUNE_EVERY
