"""Share groups (KIP-932) in the broker: the share coordinator and the data path.

- ``shard.py``: one ``__share_group_state`` partition on the coordinator runtime (Kafka's
  ``ShareCoordinatorShard``);
- ``coordinator.py``: its shards and the persister calls on them (initialize, read, write,
  read summary, delete), used by the group coordinator and the share-partition manager;
- ``manager.py``: the share-partitions this leader serves (Kafka's ``SharePartitionManager``);
- ``sessions.py``: the members' share sessions (Kafka's ``ShareSessionCache``);
- ``groups.py``: what the offset admin APIs ask of the group coordinator.

See docs/ARCHITECTURE.md, *Share groups*.
"""
