"""The consumer-group role: the group (group.py) and its members, on librdkafka or on the Java
client."""
