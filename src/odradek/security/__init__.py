"""Sans-IO pieces of Kafka's security (ZooKeeper-era 2.x): SCRAM credentials and exchanges,
ACLs and their authorizer decisions, principal mapping. Not yet wired into the broker."""
