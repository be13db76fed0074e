"""KafkaZkClient against the embedded ZooKeeper: reading many znodes at once."""

from __future__ import annotations

import asyncio
import json

from odradek.zk.client import KafkaZkClient


def test_get_many_answers_in_order_with_none_for_missing_znodes(zk_connect: str) -> None:
    async def scenario() -> tuple[list, dict]:
        zk = KafkaZkClient(zk_connect, 6000)
        await zk.start()
        try:
            for p in range(0, 300, 2):  # every other partition has a state
                await zk.create(f"/brokers/topics/t/partitions/{p}/state",
                                json.dumps({"controller_epoch": 1, "leader": p % 3, "version": 1,
                                            "leader_epoch": p, "isr": [p % 3]}).encode(), makepath=True)
            many = await zk.get_many([f"/brokers/topics/t/partitions/{p}/state" for p in range(300)])
            states = await zk.get_partition_states([("t", p) for p in range(300)])
            return many, states
        finally:
            await zk.close()

    many, states = asyncio.run(scenario())
    assert [m is None for m in many] == [p % 2 == 1 for p in range(300)]
    assert [json.loads(m[0])["leader_epoch"] for m in many if m is not None] == list(range(0, 300, 2))
    assert sorted(p for _, p in states) == list(range(0, 300, 2))
    assert all(states[("t", p)].leader_epoch == p and states[("t", p)].leader == p % 3 for p in range(0, 300, 2))
