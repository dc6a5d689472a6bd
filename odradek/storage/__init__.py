"""Durable logs on disk in Kafka's format: segments, batches, compaction, offsets-topic records."""
