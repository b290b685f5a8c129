#!/bin/bash
# Broker entrypoint honouring the env convention of the official apache/kafka image:
# every KAFKA_* variable (except the JVM/launcher ones) becomes a server.properties line,
# name without the prefix, lower-cased, '___' -> '-', '__' -> '_', '_' -> '.'.
# CLUSTER_ID formats the KRaft storage on first start; restarts keep the formatted log dirs.
#   kafka-entrypoint.sh --print-properties   prints the properties and exits (for tests)
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

if [[ ${1:-} == --print-properties ]]; then
  render_properties
  exit 0
fi

mkdir -p "$(dirname "$PROPERTIES")"
render_properties > "$PROPERTIES"

CLASSPATH="$KAFKA_HOME/libs/*"
LOG4J="-Dlog4j2.configurationFile=$KAFKA_HOME/config/log4j2.properties"
# Class-data-sharing archives recorded at image build (make-cds.sh); absent ones are skipped.
cds() { [[ -s $KAFKA_HOME/$1.jsa ]] && printf '%s' "-XX:SharedArchiveFile=$KAFKA_HOME/$1.jsa"; }
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
if [[ -n ${CLUSTER_ID:-} ]] && ! formatted; then
  # A short-lived tool: the C1 compiler alone starts fastest.
  java $(cds storage-tool) -XX:TieredStopAtLevel=1 -XX:+UseSerialGC $LOG4J -cp "$CLASSPATH" \
    kafka.tools.StorageTool format \
    --cluster-id "$CLUSTER_ID" --config "$PROPERTIES" --ignore-formatted
fi

# exec: the JVM becomes PID 1, so `docker kill` is a SIGKILL of the broker itself and
# `docker stop` a SIGTERM that runs Kafka's controlled shutdown.
# shellcheck disable=SC2086
exec java $(cds broker) ${KAFKA_HEAP_OPTS:--Xms256m -Xmx768m} \
  ${KAFKA_JVM_PERFORMANCE_OPTS:--XX:+UseG1GC -XX:MaxGCPauseMillis=20 -Djava.awt.headless=true} \
  ${KAFKA_OPTS:-} $LOG4J -cp "$CLASSPATH" kafka.Kafka "$PROPERTIES"
