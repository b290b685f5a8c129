package main

// The producer's settings: a Java properties file with Java's setting names, each mapped to
// Sarama's option where it has one. acks and idempotence are honoured exactly or the program
// refuses to run (exit 2); a setting Sarama has no equivalent for is named on stderr and left
// out. effective_config reports, by Java's names, what the producer really runs with.

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/IBM/sarama"
)

// versionKey is the one non-Java key the program reads from producer.config: the Kafka
// protocol version Sarama is told the cluster speaks (sarama.ParseKafkaVersion's form).
const versionKey = "sarama.version"

// readProperties reads a Java properties file: `key=value` or `key: value` lines, `#` and
// `!` comments, surrounding blanks trimmed.
func readProperties(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	props := map[string]string{}
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		line := strings.TrimSpace(scanner.Text())
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		cut := strings.IndexAny(line, "=:")
		if cut < 0 {
			props[line] = ""
			continue
		}
		props[strings.TrimSpace(line[:cut])] = strings.TrimSpace(line[cut+1:])
	}
	return props, scanner.Err()
}

// configError is a setting the program cannot honour: it exits 2 with the message.
type configError struct{ msg string }

func (e configError) Error() string { return e.msg }

func refuse(format string, a ...any) error {
	return configError{fmt.Sprintf(format, a...)}
}

// protocolVersion is the Kafka version Sarama is configured for: the newest the library
// knows (sarama.MaxVersion), unless producer.config's sarama.version names another.
func protocolVersion(props map[string]string) (sarama.KafkaVersion, error) {
	text, ok := props[versionKey]
	if !ok {
		return sarama.MaxVersion, nil
	}
	v, err := sarama.ParseKafkaVersion(text)
	if err != nil {
		return v, refuse("%s=%s: %v", versionKey, text, err)
	}
	return v, nil
}

// producerSetup is a Sarama configuration made from producer.config, with what it really
// runs with by Java's names.
type producerSetup struct {
	cfg        *sarama.Config
	effective  map[string]string
	idempotent bool
	txnID      string
}

func parseMillis(key, text string) (time.Duration, error) {
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil || n < 0 {
		return 0, refuse("%s=%s is not a whole number of milliseconds", key, text)
	}
	return time.Duration(n) * time.Millisecond, nil
}

func parseBool(key, text string) (bool, error) {
	switch strings.ToLower(text) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, refuse("%s=%s is neither true nor false", key, text)
}

// newProducerSetup maps producer.config onto a Sarama configuration. transactional: the
// program runs transactions (--transaction-size), which need a transactional.id.
func newProducerSetup(props map[string]string, transactional bool) (*producerSetup, error) {
	cfg := sarama.NewConfig()
	version, err := protocolVersion(props)
	if err != nil {
		return nil, err
	}
	cfg.Version = version
	cfg.ClientID = "kchaos-sarama-producer"
	cfg.Producer.Return.Successes = true
	cfg.Producer.Return.Errors = true
	s := &producerSetup{cfg: cfg, effective: map[string]string{}}
	used := map[string]bool{versionKey: true}
	take := func(key string) (string, bool) {
		v, ok := props[key]
		used[key] = true
		return v, ok
	}

	// acks and idempotence first: they decide the rest.
	acksText, acksGiven := take("acks")
	idemText, idemGiven := take("enable.idempotence")
	s.txnID, _ = take("transactional.id")
	if transactional && s.txnID == "" {
		return nil, refuse("--transaction-size needs a transactional.id in producer.config")
	}
	if idemGiven {
		if s.idempotent, err = parseBool("enable.idempotence", idemText); err != nil {
			return nil, err
		}
	} else {
		// Sarama's default is a plain producer; a transactional.id implies idempotence
		// (as in the Java client).
		s.idempotent = s.txnID != ""
	}
	if s.txnID != "" && !s.idempotent {
		return nil, refuse("transactional.id=%s needs enable.idempotence=true", s.txnID)
	}
	if acksGiven {
		switch acksText {
		case "all", "-1":
			cfg.Producer.RequiredAcks = sarama.WaitForAll
		case "1":
			cfg.Producer.RequiredAcks = sarama.WaitForLocal
		case "0":
			cfg.Producer.RequiredAcks = sarama.NoResponse
		default:
			return nil, refuse("acks=%s: only all, -1, 1 and 0 are mapped to Sarama's RequiredAcks", acksText)
		}
	} else if s.idempotent {
		cfg.Producer.RequiredAcks = sarama.WaitForAll
	} // else Sarama's default, WaitForLocal (acks=1)
	if s.idempotent {
		if cfg.Producer.RequiredAcks != sarama.WaitForAll {
			return nil, refuse("enable.idempotence=true needs acks=all (Sarama's Producer.Idempotent requires WaitForAll), got acks=%s", acksText)
		}
		if !cfg.Version.IsAtLeast(sarama.V0_11_0_0) {
			return nil, refuse("enable.idempotence=true needs %s >= 0.11.0.0, got %s", versionKey, cfg.Version)
		}
		cfg.Producer.Idempotent = true
	}
	if s.txnID != "" {
		cfg.Producer.Transaction.ID = s.txnID
		// Each message names its partition (i % P), as the Java recorder's transactions do.
		cfg.Producer.Partitioner = sarama.NewManualPartitioner
	}

	if v, ok := take("max.in.flight.requests.per.connection"); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, refuse("max.in.flight.requests.per.connection=%s is not a positive number", v)
		}
		cfg.Net.MaxOpenRequests = n
	}
	if s.idempotent && cfg.Net.MaxOpenRequests > 1 {
		fmt.Fprintf(os.Stderr, "max.in.flight.requests.per.connection=%d lowered to 1: Sarama's idempotent producer requires Net.MaxOpenRequests=1\n",
			cfg.Net.MaxOpenRequests)
		cfg.Net.MaxOpenRequests = 1
	}
	if v, ok := take("retries"); ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return nil, refuse("retries=%s is not a whole number", v)
		}
		if n > math.MaxInt32 {
			n = math.MaxInt32
		}
		if n == 0 && s.idempotent {
			return nil, refuse("enable.idempotence=true needs retries >= 1 (Sarama's Producer.Idempotent requires Retry.Max >= 1)")
		}
		cfg.Producer.Retry.Max = int(n)
	}
	durations := []struct {
		key    string
		target *time.Duration
	}{
		{"linger.ms", &cfg.Producer.Flush.Frequency},
		{"request.timeout.ms", &cfg.Producer.Timeout},
		{"retry.backoff.ms", &cfg.Producer.Retry.Backoff},
		{"transaction.timeout.ms", &cfg.Producer.Transaction.Timeout},
		{"metadata.max.age.ms", &cfg.Metadata.RefreshFrequency},
		{"socket.connection.setup.timeout.ms", &cfg.Net.DialTimeout},
	}
	for _, d := range durations {
		if v, ok := take(d.key); ok {
			if *d.target, err = parseMillis(d.key, v); err != nil {
				return nil, err
			}
		}
	}
	if cfg.Producer.Timeout <= 0 {
		return nil, refuse("request.timeout.ms must be > 0")
	}
	if v, ok := take("client.id"); ok {
		cfg.ClientID = v
	}
	if v, ok := take("max.request.size"); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return nil, refuse("max.request.size=%s is not a positive number", v)
		}
		cfg.Producer.MaxMessageBytes = n
	}
	if v, ok := take("compression.type"); ok {
		var codec sarama.CompressionCodec
		if err := codec.UnmarshalText([]byte(v)); err != nil {
			return nil, refuse("compression.type=%s: %v", v, err)
		}
		cfg.Producer.Compression = codec
	}
	var ignored []string
	for key, value := range props {
		if !used[key] {
			ignored = append(ignored, key)
			fmt.Fprintf(os.Stderr, "producer.config %s=%s has no Sarama equivalent: ignored\n", key, value)
		}
	}
	sort.Strings(ignored)
	if err := cfg.Validate(); err != nil {
		return nil, refuse("Sarama refuses the configuration: %v", err)
	}

	e := s.effective
	e["acks"] = acksName(cfg.Producer.RequiredAcks)
	e["enable.idempotence"] = strconv.FormatBool(cfg.Producer.Idempotent)
	e["max.in.flight.requests.per.connection"] = strconv.Itoa(cfg.Net.MaxOpenRequests)
	e["linger.ms"] = millis(cfg.Producer.Flush.Frequency)
	e["request.timeout.ms"] = millis(cfg.Producer.Timeout)
	e["retries"] = strconv.Itoa(cfg.Producer.Retry.Max)
	e["retry.backoff.ms"] = millis(cfg.Producer.Retry.Backoff)
	e["metadata.max.age.ms"] = millis(cfg.Metadata.RefreshFrequency)
	e["client.id"] = cfg.ClientID
	e["max.request.size"] = strconv.Itoa(cfg.Producer.MaxMessageBytes)
	e["compression.type"] = cfg.Producer.Compression.String()
	e["client.version"] = "sarama " + moduleVersion(saramaModule)
	e["sarama.version"] = cfg.Version.String() // the protocol version Sarama is configured for
	e["sarama.net.read.timeout.ms"] = millis(cfg.Net.ReadTimeout)
	if s.txnID != "" {
		e["transactional.id"] = s.txnID
		e["transaction.timeout.ms"] = millis(cfg.Producer.Transaction.Timeout)
		// Sarama speaks the transaction protocol of version 1 (no KIP-890 client side).
		e["transaction.version"] = "1"
	}
	// Sarama has no delivery timeout: a send fails after Retry.Max attempts instead.
	e["delivery.timeout.ms"] = "none"
	if len(ignored) > 0 {
		e["sarama.ignored"] = strings.Join(ignored, ",")
	}
	return s, nil
}

func acksName(acks sarama.RequiredAcks) string {
	switch acks {
	case sarama.WaitForAll:
		return "all"
	case sarama.NoResponse:
		return "0"
	}
	return strconv.Itoa(int(acks))
}
