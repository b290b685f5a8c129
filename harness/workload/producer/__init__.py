"""The producer role: the in-process librdkafka recorder, its fleet of processes, and a program
client (Java, or any command speaking the verifiable-client protocol), chosen by the cell's
client (by_client.py)."""
