"""The console's HTML: cluster-provided strings are escaped everywhere, the placement map's
cells carry their state for scripts and tests, and live pages name their fragment URL."""

from __future__ import annotations

from odradek.admin.group_admin import GroupDescription, MemberDescription
from odradek.common import TopicPartition
from odradek.console import pages
from odradek.console.cluster_reader import BrowsedRecord, ConfigEntry, GroupLag, LogDirSummary
from odradek.console.model import (
    BrokerInfo,
    ClusterSnapshot,
    LagHistory,
    PartitionInfo,
    placement_rows,
)
from odradek.protocol.errors import ErrorCode, for_code
from odradek.security.acls import (
    Acl,
    KafkaPrincipal,
    Operation,
    PermissionType,
    ResourcePattern,
    ResourceType,
)

EVIL = '<img src=x onerror="alert(1)">'


def snapshot() -> ClusterSnapshot:
    return ClusterSnapshot.of([BrokerInfo(0, EVIL, 9092, EVIL), BrokerInfo(1, "h1", 9092, None)], 1,
                              [PartitionInfo("t", 0, 1, (0, 1), (1,))])


def test_placement_map_cells_carry_state_and_preference_and_escape_racks() -> None:
    s = snapshot()
    html = pages.placement_fragment(s, placement_rows(s, "t"))
    assert EVIL not in html and "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in html
    assert '<tr data-topic="t" data-partition="0" data-leader="1">' in html
    assert 'data-broker="0" data-state="out-of-isr" data-preferred="true"' in html
    assert 'data-broker="1" data-state="leader" data-preferred="false"' in html
    assert "1 under-replicated, 0 offline" in html


def test_a_live_page_names_its_fragment_and_escapes_its_title() -> None:
    html = pages.page(EVIL, "<p>body</p>", live_src="/groups/x?fragment=1")
    assert EVIL not in html
    assert '<div id="live" data-src="/groups/x?fragment=1"><p>body</p></div>' in html
    assert "setTimeout(refresh, 1000)" in html
    assert "<script>" not in pages.page("t", "b")


def test_records_configs_and_log_dirs_are_text() -> None:
    record = BrowsedRecord(7, 0, EVIL.encode(), b"\xff<b>", ((EVIL, b"v"), ("h", None)))
    html = pages.messages_fragment("t", [0, 1], 1, 5, True, [record])
    assert EVIL not in html and "<b>" not in html.split('id="records"')[1]
    assert "&lt;b&gt;" in html and "\ufffd" in html  # undecodable bytes replaced, not dropped
    assert '<option selected>1</option>' in html and "checked" in html
    configs = [ConfigEntry("retention.ms", EVIL, "topic", False), ConfigEntry("sasl.jaas.config", "secret", "x", True)]
    topic = pages.topic_fragment("t", snapshot(), {}, {}, {}, None, configs)
    assert EVIL not in topic and "secret" not in topic and "(sensitive)" in topic
    assert "unknown (no --metrics)" in topic
    dirs = pages.cluster_fragment(snapshot(), {0: [LogDirSummary(0, EVIL, None, 3 * 1024 * 1024, 2, {})],
                                               1: "ConnectionError: gone"})
    assert EVIL not in dirs and "3.0 MiB" in dirs and "ConnectionError: gone" in dirs


def test_group_page_shows_total_lag_members_and_history() -> None:
    description = GroupDescription("g", "Stable", "consumer", "range",
                                   (MemberDescription("m-1", EVIL, "/h", (TopicPartition("t", 0),)),), (2, "h", 1))
    group = GroupLag(description, (("t", 0, 10, 25), ("t", 1, None, 5)))
    history = LagHistory()
    history.record("g", {("t", 0): 30}, 1.0)
    history.record("g", group.lags(), 2.0)
    html = pages.group_fragment(group, history)
    assert '<b id="total-lag">15</b>' in html and '<b id="state">Stable</b>' in html
    assert EVIL not in html and "t-0" in html
    assert "<polyline" in html and "30 15" in html


def test_security_lists_acls_and_users_escaped() -> None:
    acls = {ResourcePattern(ResourceType.TOPIC, EVIL): frozenset({
        Acl(KafkaPrincipal.parse("User:bob"), PermissionType.ALLOW, "*", Operation.READ)})}
    html = pages.security_fragment(acls, [("alice", "SCRAM-SHA-512 (4096 iterations)")])
    assert EVIL not in html and "User:bob" in html and "READ" in html and "alice" in html
    refused = pages.security_fragment(PermissionError("no"), [])
    assert "Could not read the ACLs: PermissionError: no" in refused
    plain = pages.security_fragment(for_code(ErrorCode.security_disabled)("No Authorizer is configured"), [])
    assert "No authorizer on this cluster: ACLs are off." in plain
