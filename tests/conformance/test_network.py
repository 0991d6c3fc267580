"""The cut points of a recorded conversation (`connectors.conformance.network.cut_points`): pure logic, no servers."""

from __future__ import annotations

import re

from connectors.conformance.network import CUT_KINDS, KINDS, cut_points
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
