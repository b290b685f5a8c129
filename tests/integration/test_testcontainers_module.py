"""The cluster as a Testcontainers module (docs/testcontainers.md's example): a team's own
container, built locally from a Dockerfile and joined to the cluster's network, produces
through a leader kill, and the harness's verdict on what it acknowledged is PASS for acks=all.

The team's program here is the harness's Java recorder (it speaks the verifiable-client
protocol, docs/clients.md) on top of the broker image, whose libs hold kafka-clients."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
from testcontainers.core.container import DockerContainer
from testcontainers.core.image import DockerImage

from harness.workload.java_client import RECORDER_CLASS, java_client
from kafka_chaos.testing import KafkaChaosCluster, Verdict

RELEASE = "4.3.1"
SENDS = 500
DOCKERFILE = """FROM {base}
COPY classes /app/classes
ENTRYPOINT ["java", "-cp", "/app/classes:/opt/kafka/libs/*", "{main}"]
"""


def producer_image(base: str, context: Path) -> DockerImage:
    """The team's producer image: the compiled recorder on top of the broker image."""
    classes = Path(java_client(RELEASE).argv[2].split(":")[0])
    shutil.copytree(classes, context / "classes")
    (context / "Dockerfile").write_text(DOCKERFILE.format(base=base, main=RECORDER_CLASS))
    return DockerImage(path=context, tag="kafka-chaos-test/team-producer:latest")


def acknowledged(container: DockerContainer) -> int:
    stdout, _ = container.get_logs()
    return stdout.count(b'"producer_send_success"')


@pytest.mark.integration
def test_a_teams_container_produces_through_a_leader_kill_and_passes(tmp_path: Path) -> None:
    with KafkaChaosCluster().with_release(RELEASE).with_brokers(3) as cluster:
        run = cluster.run(tmp_path / "kafka-chaos")
        journal = run.journal({"acks": "all", "enable.idempotence": True})
        assert cluster.leader_of(run.topic, 0) in (1, 2, 3)
        context = tmp_path / "image"
        context.mkdir()
        with producer_image(cluster.image.tag if cluster.image else "", context) as image:
            producer = (
                DockerContainer(str(image))
                .with_network(cluster.network)
                .with_copy_into_container(b"acks=all\nenable.idempotence=true\n", "/app/p.props")
                .with_command(
                    [
                        "--bootstrap-server",
                        cluster.network_bootstrap_servers(),
                        "--topic",
                        run.topic,
                        "--producer.config",
                        "/app/p.props",
                        "--max-messages",
                        str(SENDS),
                        "--throughput",
                        "100",
                        "--keys",
                        str(journal.keys),
                        "--message-bytes",
                        str(journal.message_bytes),
                    ]
                )
            )
            with producer:
                started = time.monotonic()
                while acknowledged(producer) < SENDS // 5:  # sending steadily: now the fault
                    assert time.monotonic() - started < 60, producer.get_logs()
                    time.sleep(0.1)
                killed = cluster.kill("leader", partition=0)
                time.sleep(2)
                killed.heal()
                assert producer.wait() == 0
                stdout, _ = producer.get_logs()
        assert journal.record_lines(stdout.decode().splitlines()) == SENDS
        verdict = run.judge()
    assert verdict.verdict is Verdict.PASS, verdict.reasons
    assert verdict.loss == 0 and verdict.acked == SENDS
    assert killed.nodes
