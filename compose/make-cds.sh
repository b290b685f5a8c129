#!/bin/bash
# Image build step: record AppCDS archives (class data sharing) for the storage tool and the
# broker by running each once, so containers load Kafka's classes from a mapped archive
# instead of parsing ~40 jars on every start: three JVMs share two cores at cluster start.
set -euo pipefail
KAFKA_HOME=${KAFKA_HOME:-/opt/kafka}
CLASSPATH="$KAFKA_HOME/libs/*"
LOG4J="-Dlog4j2.configurationFile=$KAFKA_HOME/config/log4j2.properties"
work=$(mktemp -d)
cat > "$work/server.properties" <<PROPS
node.id=1
process.roles=broker,controller
listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093
controller.listener.names=CONTROLLER
controller.quorum.voters=1@127.0.0.1:9093
log.dirs=$work/data
offsets.topic.replication.factor=1
PROPS
java -XX:ArchiveClassesAtExit="$KAFKA_HOME/storage-tool.jsa" $LOG4J -cp "$CLASSPATH" \
  kafka.tools.StorageTool format --cluster-id q1Sh-9_ISia_zwGINzRvyQ --config "$work/server.properties"
java -XX:ArchiveClassesAtExit="$KAFKA_HOME/broker.jsa" $LOG4J -cp "$CLASSPATH" \
  kafka.Kafka "$work/server.properties" > "$work/broker.log" 2>&1 &
broker=$!
for _ in $(seq 1 240); do
  grep -q "Kafka Server started" "$work/broker.log" && break
  sleep 0.5
done
kill -TERM "$broker"
wait "$broker" || true
rm -rf "$work"
ls -la "$KAFKA_HOME"/*.jsa
