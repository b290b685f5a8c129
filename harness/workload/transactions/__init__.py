"""The transactional producer role, on librdkafka or on the Java client, and the reads of a
consume-transform-produce transaction (reads.py)."""
