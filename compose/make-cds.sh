#!/bin/bash
# Image build step: record AppCDS archives (class data sharing) by running each program once,
# so containers load Kafka's classes from a mapped archive instead of parsing dozens of jars
# on every start: six or more JVMs share two cores at cluster start.
#   make-cds.sh kraft        storage tool and broker, from a one-node KRaft cluster (3.3+)
#   make-cds.sh zookeeper    ZooKeeper, and the broker if no KRaft step recorded it (< 4.0)
# An archive is an optimisation: a step that fails (an old release that cannot run this way
# on this JRE) leaves no archive behind, and the entrypoint then starts without one.
set -uo pipefail
KAFKA_HOME=${KAFKA_HOME:-/opt/kafka}
CLASSPATH="$KAFKA_HOME/libs/*"
LOG4J="-Dlog4j.configuration=file:$KAFKA_HOME/config/log4j.properties \
-Dlog4j2.configurationFile=$KAFKA_HOME/config/log4j2.properties"
work=$(mktemp -d)

# Wait until the program writing `log` logged a line matching `pattern`; false after 2 min.
await_line() {
  local log=$1 pattern=$2
  for _ in $(seq 1 240); do
    grep -Eq "$pattern" "$log" && return 0
    sleep 0.5
  done
  echo "make-cds: no line matching '$pattern' in $log:" >&2
  tail -n 20 "$log" >&2
  return 1
}

# Start `name`'s program recording its archive, wait for `pattern`, then stop it (SIGTERM:
# the archive is written at exit). Drops the archive unless the program got that far.
record() {
  local name=$1 pattern=$2
  shift 2
  # shellcheck disable=SC2086
  java -XX:ArchiveClassesAtExit="$KAFKA_HOME/$name.jsa" $LOG4J -cp "$CLASSPATH" "$@" \
    > "$work/$name.log" 2>&1 &
  local pid=$!
  local ok=0
  await_line "$work/$name.log" "$pattern" || ok=1
  kill -TERM "$pid" 2>/dev/null
  wait "$pid"
  [[ $ok == 0 ]] || rm -f "$KAFKA_HOME/$name.jsa"
  return $ok
}

kraft() {
  cat > "$work/kraft.properties" <<PROPS
node.id=1
process.roles=broker,controller
listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093
controller.listener.names=CONTROLLER
controller.quorum.voters=1@127.0.0.1:9093
log.dirs=$work/kraft-data
offsets.topic.replication.factor=1
PROPS
  # shellcheck disable=SC2086
  java -XX:ArchiveClassesAtExit="$KAFKA_HOME/storage-tool.jsa" $LOG4J -cp "$CLASSPATH" \
    kafka.tools.StorageTool format --cluster-id q1Sh-9_ISia_zwGINzRvyQ \
    --config "$work/kraft.properties" || { rm -f "$KAFKA_HOME/storage-tool.jsa"; return 1; }
  record broker "Kafka Server started" kafka.Kafka "$work/kraft.properties"
}

zookeeper() {
  printf '%s\n' "dataDir=$work/zk-data" clientPort=2181 tickTime=2000 \
    admin.enableServer=false > "$work/zoo.cfg"
  java -XX:ArchiveClassesAtExit="$KAFKA_HOME/zookeeper.jsa" -XX:+UseSerialGC $LOG4J \
    -cp "$CLASSPATH" org.apache.zookeeper.server.quorum.QuorumPeerMain "$work/zoo.cfg" \
    > "$work/zookeeper.log" 2>&1 &
  local zk=$!
  local zk_ok=0 ok=0
  await_line "$work/zookeeper.log" "binding to port" || zk_ok=1
  if [[ $zk_ok == 0 && ! -s $KAFKA_HOME/broker.jsa ]]; then
    cat > "$work/zk.properties" <<PROPS
broker.id=1
zookeeper.connect=127.0.0.1:2181
listeners=PLAINTEXT://127.0.0.1:9092
log.dirs=$work/zk-kafka-data
offsets.topic.replication.factor=1
PROPS
    # 0.10 to 2.x log "[Kafka Server 1], started" or "[KafkaServer id=1] started".
    record broker "started \(kafka\.server\.KafkaServer\)" kafka.Kafka "$work/zk.properties" \
      || ok=1
  fi
  kill -TERM "$zk" 2>/dev/null
  wait "$zk"
  [[ $zk_ok == 0 ]] || rm -f "$KAFKA_HOME/zookeeper.jsa"
  return $((zk_ok || ok))
}

for step in "$@"; do
  "$step" || echo "make-cds: no $step archives; containers start without them" >&2
done
rm -rf "$work"
ls -la "$KAFKA_HOME"/*.jsa 2>/dev/null || echo "make-cds: no archives recorded" >&2
exit 0
