"""The offsets-topic domain: what ``__consumer_offsets`` holds and what its records mean.

Below the broker and the pipeline, above storage (which knows bytes, batches
and files, never groups): both the coordinator and the Spark jobs read these.

- ``records``: the record schemas (OffsetCommitKey/Value, GroupMetadataKey/
  Value, all versions), the choice of the version to write, and Kafka's
  group -> partition hash.
- ``transactions``: transactional offset commits, pending until their
  producer's marker (the rules a shard replays them by), and their records.
- ``replay``: which records of a log count (transactional offset commits
  only once their transaction committed), for offline readers.
- ``expiry``: the KIP-211 rules for when committed offsets expire.
- ``consumer_protocol``: the ``consumer`` protocol's Subscription and
  Assignment blobs that group records carry.
"""
