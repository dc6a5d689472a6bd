"""Share groups (KIP-932): what ``__share_group_state`` holds and how a share-partition hands out records.

Below the broker, above storage and protocol, sans-I/O: the broker owns the
clock, the log reads and the coordinator runtime that writes these records.

- ``records``: the ShareSnapshot / ShareUpdate keys and values of
  ``__share_group_state``, byte-exact with Kafka 4.2, and Kafka's placement
  of a share-partition's state on that topic.
- ``partition``: the share-partition state machine (acquire, acknowledge,
  lock expiry, delivery counts, start offset) and its durable state as
  Kafka's persister state batches, with the replay that rebuilds it.
"""
