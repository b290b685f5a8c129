#!/bin/bash
# One image, two roles, chosen by KCHAOS_ROLE:
# - kafka (the default): a broker and/or KRaft controller. Every KAFKA_* variable (except the
#   JVM/launcher ones) becomes a server.properties line, as in the official apache/kafka
#   image: name without the prefix, lower-cased, '___' -> '-', '__' -> '_', '_' -> '.'.
#   CLUSTER_ID formats the KRaft storage on first start when the properties have
#   process.roles (KRaft, 3.3+), with KCHAOS_FORMAT_ARGS added to the storage tool's format
#   command (e.g. --initial-controllers for a KIP-853 dynamic quorum); restarts keep the
#   formatted log dirs. Without process.roles the broker runs in ZooKeeper mode.
# - zookeeper: a ZooKeeper server (releases before 4.0 carry its jar) with a zoo.cfg rendered
#   from ZOO_MY_ID and ZOO_SERVERS ("server.1=zookeeper-1:2888:3888 server.2=..."; empty for
#   a standalone server), as in the official zookeeper image.
#   kafka-entrypoint.sh --print-properties   prints the broker properties and exits (for tests)
#   kafka-entrypoint.sh --print-zoo-cfg      prints zoo.cfg and exits (for tests)
set -euo pipefail

KAFKA_HOME=${KAFKA_HOME:-/opt/kafka}
PROPERTIES=${KAFKA_PROPERTIES_FILE:-$KAFKA_HOME/config/server.properties}
NOT_PROPERTIES=" KAFKA_VERSION KAFKA_HEAP_OPTS KAFKA_LOG4J_OPTS KAFKA_OPTS KAFKA_JMX_OPTS \
KAFKA_JVM_PERFORMANCE_OPTS KAFKA_GC_LOG_OPTS KAFKA_LOG4J_ROOT_LOGLEVEL KAFKA_LOG4J_LOGGERS \
KAFKA_TOOLS_LOG4J_LOGLEVEL KAFKA_JMX_HOSTNAME KAFKA_HOME KAFKA_PROPERTIES_FILE "

property_name() {
  local name=${1#KAFKA_}
  name=${name,,}
  name=${name//___/-}
  name=${name//__/$'\x01'}
  name=${name//_/.}
  printf '%s' "${name//$'\x01'/_}"
}

render_properties() {
  local var
  for var in $(compgen -e | LC_ALL=C sort); do
    [[ $var == KAFKA_* ]] || continue
    [[ $NOT_PROPERTIES == *" $var "* ]] && continue
    printf '%s=%s\n' "$(property_name "$var")" "${!var}"
  done
}

ZOO_DATA_DIR=${ZOO_DATA_DIR:-/var/lib/zookeeper/data}
ZOO_CFG=$KAFKA_HOME/config/zoo.cfg

render_zoo_cfg() {
  # The 3.5+ keys are harmless to 3.4, which keeps unknown keys as system properties.
  # quorumListenOnAllIPs: a server binds its election ports on every interface of the
  # container, not only on the address its own name resolved to.
  printf '%s\n' "dataDir=$ZOO_DATA_DIR" clientPort=2181 tickTime=2000 initLimit=10 syncLimit=5 \
    maxClientCnxns=0 admin.enableServer=false '4lw.commands.whitelist=*' quorumListenOnAllIPs=true
  local server
  for server in ${ZOO_SERVERS:-}; do
    printf '%s\n' "$server"
  done
}

case ${1:-} in
  --print-properties) render_properties; exit 0 ;;
  --print-zoo-cfg) render_zoo_cfg; exit 0 ;;
esac

CLASSPATH="$KAFKA_HOME/libs/*"
# Releases before 4.0 (and ZooKeeper) log through log4j 1.2, 4.x through log4j 2: name both.
LOG4J="-Dlog4j.configuration=file:$KAFKA_HOME/config/log4j.properties \
-Dlog4j2.configurationFile=$KAFKA_HOME/config/log4j2.properties"
# Class-data-sharing archives recorded at image build (make-cds.sh); absent ones are skipped.
cds() { [[ -s $KAFKA_HOME/$1.jsa ]] && printf '%s' "-XX:SharedArchiveFile=$KAFKA_HOME/$1.jsa"; }
# ZooKeeper 3.4 resolves its peers' names once, at start: wait until each one resolves
# (a peer's name exists once its container runs), or give up after a minute and let it try.
await_peer_names() {
  local server host
  for server in ${ZOO_SERVERS:-}; do
    host=${server#*=}
    host=${host%%:*}
    for _ in $(seq 1 240); do
      getent hosts "$host" >/dev/null && break
      sleep 0.25
    done
  done
}

if [[ ${KCHAOS_ROLE:-kafka} == zookeeper ]]; then
  mkdir -p "$ZOO_DATA_DIR" "$(dirname "$ZOO_CFG")"
  render_zoo_cfg > "$ZOO_CFG"
  printf '%s\n' "${ZOO_MY_ID:-1}" > "$ZOO_DATA_DIR/myid"
  await_peer_names
  # shellcheck disable=SC2086
  exec java $(cds zookeeper) ${ZOO_HEAP_OPTS:--Xms64m -Xmx256m} -XX:+UseSerialGC \
    -Djava.awt.headless=true $LOG4J -cp "$CLASSPATH" \
    org.apache.zookeeper.server.quorum.QuorumPeerMain "$ZOO_CFG"
fi

mkdir -p "$(dirname "$PROPERTIES")"
render_properties > "$PROPERTIES"

# True when every log dir already holds meta.properties: a restart, nothing to format.
formatted() {
  local dirs dir
  dirs=$(sed -n 's/^log\.dirs=//p' "$PROPERTIES")
  [[ -n $dirs ]] || return 1
  for dir in ${dirs//,/ }; do
    [[ -s $dir/meta.properties ]] || return 1
  done
}

# On a restart the format tool would only say "already formatted", after a JVM start of
# seconds on a loaded machine: skip it, so a restarted broker is back sooner.
# Only KRaft nodes (process.roles) have storage to format; ZooKeeper-mode brokers have none.
if [[ -n ${CLUSTER_ID:-} ]] && grep -q '^process\.roles=' "$PROPERTIES" && ! formatted; then
  # A short-lived tool: the C1 compiler alone starts fastest.
  # shellcheck disable=SC2086
  java $(cds storage-tool) -XX:TieredStopAtLevel=1 -XX:+UseSerialGC $LOG4J -cp "$CLASSPATH" \
    kafka.tools.StorageTool format \
    --cluster-id "$CLUSTER_ID" --config "$PROPERTIES" --ignore-formatted ${KCHAOS_FORMAT_ARGS:-}
fi

# exec: the JVM becomes PID 1, so `docker kill` is a SIGKILL of the broker itself and
# `docker stop` a SIGTERM that runs Kafka's controlled shutdown.
# The C1 compiler alone: on a small machine the brokers' C2 compilations compete with the
# brokers themselves for the cores, through start and the experiment's minutes alike
# (bench/broker_jvm_bench.py measures both against the tiered default).
# shellcheck disable=SC2086
exec java $(cds broker) ${KAFKA_HEAP_OPTS:--Xms256m -Xmx768m} \
  ${KAFKA_JVM_PERFORMANCE_OPTS:--XX:TieredStopAtLevel=1 -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -Djava.awt.headless=true} \
  ${KAFKA_OPTS:-} $LOG4J -cp "$CLASSPATH" kafka.Kafka "$PROPERTIES"
