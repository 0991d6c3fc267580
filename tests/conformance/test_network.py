"""The cut points of a recorded conversation (`connectors.conformance.network.cut_points`): pure logic, no servers."""

from __future__ import annotations

import re

from connectors.conformance.network import CUT_KINDS, KINDS, alike, context_of, cut_points
from connectors.servers.tap import DOWN, UP, Conversation

#: three round trips: requests of 10, 20 and 3 bytes, replies of 5, 7 and 4
TURNS = [(UP, 10), (DOWN, 5), (UP, 20), (DOWN, 7), (UP, 3), (DOWN, 4)]


def test_every_kind_is_placed_at_its_boundaries_with_the_bytes_carried_the_other_way():
    cuts = cut_points(Conversation(list(TURNS)))
    requests, replies = len(TURNS) // 2, len(TURNS) // 2 - 1  # no cut after the last reply: the write is over
    per_place = {"inside_request": requests, "after_request": requests, "after_reply": replies}
    assert len(cuts) == sum(per_place[kind.at] for kind in KINDS.values())
    assert {c.kind for c in cuts} == set(CUT_KINDS)
    stall = next(c for c in cuts if c.kind == "stall_after_reply" and c.size == 12)
    assert (stall.direction, stall.other, stall.toxic) == (DOWN, 30, "timeout")
    assert str(stall) == "stall after reply 2, before request 3 (target → sink after 12 bytes)"
    reset = next(c for c in cuts if c.kind == "reset_after_request" and c.size == 30)
    assert (reset.direction, reset.other, str(reset).split()[0]) == (UP, 5, "reset")


def test_kinds_and_a_skipped_handshake_narrow_the_sweep():
    conversation = Conversation(list(TURNS))
    closes = cut_points(conversation, ("inside_request", "after_request", "after_reply"))
    assert [(c.kind, c.size) for c in closes[:3]] == [("inside_request", 9), ("after_request", 10), ("after_reply", 5)]
    after_first = cut_points(conversation, ("inside_request", "after_request", "after_reply"), skip=1)
    assert after_first == [c for c in closes if re.search(r"\d+", c.where)[0] != "1"]  # nothing of round trip 1
    assert cut_points(conversation, ("after_reply",), skip=2) == []       # the last reply has no cut after it


#: a transactional producer's write: a handshake, AddPartitionsToTxn, the data, EndTxn, then one more round trip;
#: `RETRIED` has AddPartitionsToTxn sent twice (as librdkafka does when the broker answers that the previous
#: transaction is still closing), which puts the reply to the data at the bytes of the reply to EndTxn
KAFKA = [(UP, 41), (DOWN, 669), (UP, 81), (DOWN, 39), (UP, 8508), (DOWN, 74), (UP, 81), (DOWN, 39), (UP, 229), (DOWN, 48)]
RETRIED = KAFKA[:4] + KAFKA[2:4] + KAFKA[4:]


def after_the_commit(turns):
    """The stall after the reply to EndTxn (the 81-byte request after the data) in `turns`."""
    return next(c for c in cut_points(Conversation(list(turns)), ("stall_after_reply",))
                if c.context[-4:-2] == ((UP, 8508), (DOWN, 74)))


def test_a_cut_lands_only_where_the_turns_before_it_are_the_recorded_ones():
    cut = after_the_commit(KAFKA)
    assert cut.context == ((UP, 8508), (DOWN, 74), (UP, 81), (DOWN, 39))
    assert cut.landed(Conversation(list(KAFKA)))
    moved = Conversation(list(RETRIED))
    assert context_of(moved, cut.direction, cut.size) is not None  # the same byte counts are reached…
    assert not cut.landed(moved)                                   # …after the data's reply, not the commit's
    assert not cut.landed(Conversation(KAFKA[:5]))                 # a conversation that stopped before it


def test_another_shape_holds_the_same_point_at_other_bytes():
    cut, there = after_the_commit(KAFKA), after_the_commit(RETRIED)
    assert there.same_point(cut) and not there.same_place(cut) and there.size == cut.size + 39
    assert there.landed(Conversation(list(RETRIED))) and not there.landed(Conversation(list(KAFKA)))


def test_turns_a_digit_apart_are_alike_and_other_requests_are_not():
    assert alike(((DOWN, 145), (UP, 95)), ((DOWN, 146), (UP, 95)))     # Redis's handshake reply: the client's id
    assert not alike(((UP, 79), (DOWN, 5)), ((UP, 14), (DOWN, 7)))      # another command (a PING) in its place
    assert not alike(((UP, 81), (DOWN, 39)), ((UP, 81),))               # fewer turns
    shifted = Conversation([(UP, 22), (DOWN, 146)] + [(d, n) for d, n in TURNS])
    cut = next(c for c in cut_points(Conversation([(UP, 22), (DOWN, 145)] + list(TURNS)), ("after_reply",)) if c.size > 145)
    assert cut.landed(shifted)  # fired one byte short of the reply it was recorded after


def test_points_are_counted_from_the_taps_reset_on_a_connection_open_before_it():
    reused = Conversation([(UP, 100), (DOWN, 50)] + list(TURNS), base={UP: 100, DOWN: 50})
    assert [(c.kind, c.size, c.other) for c in cut_points(reused, ("after_request",))] == \
        [(c.kind, c.size, c.other) for c in cut_points(Conversation(list(TURNS)), ("after_request",))]
