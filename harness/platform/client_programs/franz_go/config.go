package main

// The producer's settings: a Java properties file with Java's setting names, mapped to kgo
// options, and the settings kgo really runs with (effective_config).

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// readProperties reads a Java properties file: `key=value`, `key: value` or `key value`
// lines, # and ! comments, a trailing backslash continuing a line, \-escapes in both.
func readProperties(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	props := map[string]string{}
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 1<<16), 1<<20)
	var pending string
	for scanner.Scan() {
		line := strings.TrimLeft(scanner.Text(), " \t\f")
		if pending == "" && (line == "" || line[0] == '#' || line[0] == '!') {
			continue
		}
		if continued(line) {
			pending += line[:len(line)-1]
			continue
		}
		line, pending = pending+line, ""
		key, value := splitProperty(line)
		props[key] = value
	}
	if pending != "" {
		key, value := splitProperty(pending)
		props[key] = value
	}
	return props, scanner.Err()
}

// continued: the line ends in an odd number of backslashes.
func continued(line string) bool {
	n := 0
	for i := len(line) - 1; i >= 0 && line[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

func splitProperty(line string) (string, string) {
	var key strings.Builder
	i := 0
	for ; i < len(line); i++ {
		c := line[i]
		if c == '\\' && i+1 < len(line) {
			i++
			key.WriteByte(unescape(line[i]))
			continue
		}
		if c == '=' || c == ':' || c == ' ' || c == '\t' || c == '\f' {
			break
		}
		key.WriteByte(c)
	}
	rest := strings.TrimLeft(line[i:], " \t\f")
	if rest != "" && (rest[0] == '=' || rest[0] == ':') {
		rest = strings.TrimLeft(rest[1:], " \t\f")
	}
	var value strings.Builder
	for j := 0; j < len(rest); j++ {
		if rest[j] == '\\' && j+1 < len(rest) {
			j++
			value.WriteByte(unescape(rest[j]))
			continue
		}
		value.WriteByte(rest[j])
	}
	return key.String(), value.String()
}

func unescape(c byte) byte {
	switch c {
	case 't':
		return '\t'
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 'f':
		return '\f'
	}
	return c
}

// producerSettings is what the properties file asks of the producer, resolved.
type producerSettings struct {
	opts       []kgo.Opt
	acks       string // all, 1 or 0
	idempotent bool
	txnID      string
	maxBlock   time.Duration // how long a transaction's init, flush, offer and end may take
}

// Settings the program takes care of itself, or that only make sense in Java.
var ignoredKeys = map[string]string{
	"bootstrap.servers": "given by --bootstrap-server",
	"key.serializer":    "franz-go sends bytes",
	"value.serializer":  "franz-go sends bytes",
}

// producerOptions maps the properties to kgo options. An error is a setting the program
// cannot honour exactly (acks, idempotence): the caller exits 2.
func producerOptions(props map[string]string) (producerSettings, error) {
	s := producerSettings{acks: "all", idempotent: true, maxBlock: 60 * time.Second}
	var unmapped []string
	number := func(key string) (int64, error) {
		n, err := strconv.ParseInt(strings.TrimSpace(props[key]), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s=%q is not a whole number", key, props[key])
		}
		return n, nil
	}
	ms := func(key string) (time.Duration, error) {
		n, err := number(key)
		return time.Duration(n) * time.Millisecond, err
	}

	if v, ok := props["acks"]; ok {
		switch strings.TrimSpace(strings.ToLower(v)) {
		case "all", "-1":
			s.opts = append(s.opts, kgo.RequiredAcks(kgo.AllISRAcks()))
		case "1":
			s.acks = "1"
			s.opts = append(s.opts, kgo.RequiredAcks(kgo.LeaderAck()))
		case "0":
			s.acks = "0"
			s.opts = append(s.opts, kgo.RequiredAcks(kgo.NoAck()))
		default:
			return s, fmt.Errorf("acks=%q: franz-go has acks all, 1 and 0 only", v)
		}
	}
	s.txnID = props["transactional.id"]
	inflight := int64(-1)
	if _, ok := props["max.in.flight.requests.per.connection"]; ok {
		n, err := number("max.in.flight.requests.per.connection")
		if err != nil {
			return s, err
		}
		inflight = n
	}
	if v, ok := props["enable.idempotence"]; ok {
		switch strings.TrimSpace(strings.ToLower(v)) {
		case "true":
			if s.acks != "all" {
				return s, fmt.Errorf("enable.idempotence=true with acks=%s: franz-go's idempotent producer requires acks=all", s.acks)
			}
		case "false":
			if s.txnID != "" {
				return s, fmt.Errorf("enable.idempotence=false with transactional.id: franz-go's transactions are idempotent")
			}
			s.idempotent = false
		default:
			return s, fmt.Errorf("enable.idempotence=%q is neither true nor false", v)
		}
	} else if s.txnID == "" {
		// Not asked for: as the Java client since 3.2 (and the harness's java_durability),
		// a setting idempotence cannot have turns it off rather than failing.
		retriesZero := strings.TrimSpace(props["retries"]) == "0"
		if s.acks != "all" || inflight > 5 || retriesZero {
			s.idempotent = false
			fmt.Fprintf(os.Stderr, "enable.idempotence not set and acks=%s, max.in.flight=%d, retries=%q: idempotence off (as the Java client resolves it)\n",
				s.acks, inflight, props["retries"])
		}
	}
	if !s.idempotent {
		s.opts = append(s.opts, kgo.DisableIdempotentWrite())
		if inflight > 0 {
			s.opts = append(s.opts, kgo.MaxProduceRequestsInflightPerBroker(int(inflight)))
		}
	} else if inflight >= 0 {
		fmt.Fprintf(os.Stderr, "max.in.flight.requests.per.connection=%d ignored: franz-go's idempotent producer keeps up to 5 produce requests in flight per broker (1 before Kafka 1.0)\n", inflight)
	}
	if s.txnID != "" {
		s.opts = append(s.opts, kgo.TransactionalID(s.txnID))
	}

	for _, key := range sortedKeys(props) {
		var err error
		var d time.Duration
		var n int64
		switch key {
		case "acks", "enable.idempotence", "max.in.flight.requests.per.connection", "transactional.id":
			// above
		case "linger.ms":
			if d, err = ms(key); err == nil {
				s.opts = append(s.opts, kgo.ProducerLinger(d))
			}
		case "request.timeout.ms":
			// Java's request.timeout.ms is also the timeout its produce requests carry.
			if d, err = ms(key); err == nil {
				s.opts = append(s.opts, kgo.ProduceRequestTimeout(d))
			}
		case "delivery.timeout.ms":
			if d, err = ms(key); err == nil {
				s.opts = append(s.opts, kgo.RecordDeliveryTimeout(d))
			}
		case "retries":
			if n, err = number(key); err == nil {
				s.opts = append(s.opts, kgo.RecordRetries(int(min(n, math.MaxInt32))))
			}
		case "transaction.timeout.ms":
			if d, err = ms(key); err == nil {
				s.opts = append(s.opts, kgo.TransactionTimeout(d))
			}
		case "client.id":
			s.opts = append(s.opts, kgo.ClientID(props[key]))
		case "batch.size":
			if n, err = number(key); err == nil {
				s.opts = append(s.opts, kgo.ProducerBatchMaxBytes(int32(n)))
				fmt.Fprintln(os.Stderr, "batch.size mapped to kgo.ProducerBatchMaxBytes (a batch's maximum, not Java's target)")
			}
		case "buffer.memory":
			if n, err = number(key); err == nil {
				s.opts = append(s.opts, kgo.MaxBufferedBytes(int(n)))
			}
		case "compression.type":
			var codec kgo.CompressionCodec
			if codec, err = compression(props[key]); err == nil {
				s.opts = append(s.opts, kgo.ProducerBatchCompression(codec))
			}
		case "retry.backoff.ms":
			if d, err = ms(key); err == nil {
				backoff := d
				s.opts = append(s.opts, kgo.RetryBackoffFn(func(int) time.Duration { return backoff }))
			}
		case "max.block.ms":
			s.maxBlock, err = ms(key)
			fmt.Fprintln(os.Stderr, "max.block.ms bounds the program's transaction calls (init, flush, offsets, end), as Java's does")
		default:
			if why, ok := ignoredKeys[key]; ok {
				fmt.Fprintf(os.Stderr, "%s ignored: %s\n", key, why)
			} else {
				unmapped = append(unmapped, key)
			}
		}
		if err != nil {
			return s, err
		}
	}
	for _, key := range unmapped {
		fmt.Fprintf(os.Stderr, "%s=%s: franz-go has no equivalent here; ignored\n", key, props[key])
	}
	return s, nil
}

func compression(name string) (kgo.CompressionCodec, error) {
	switch strings.TrimSpace(strings.ToLower(name)) {
	case "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("compression.type=%q unknown", name)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// producerEffective is the producer's settings as the client resolved them, by Java's names.
func producerEffective(cl *kgo.Client, s producerSettings) map[string]string {
	eff := map[string]string{
		"client.name":        "franz-go",
		"client.version":     moduleVersion(franzModule),
		"acks":               s.acks,
		"enable.idempotence": strconv.FormatBool(s.idempotent),
	}
	if s.idempotent {
		eff["max.in.flight.requests.per.connection"] = "5"
	} else if n, ok := cl.OptValue(kgo.MaxProduceRequestsInflightPerBroker).(int); ok {
		eff["max.in.flight.requests.per.connection"] = strconv.Itoa(n)
	}
	if d, ok := cl.OptValue(kgo.ProducerLinger).(time.Duration); ok {
		eff["linger.ms"] = millis(d)
	}
	if d, ok := cl.OptValue(kgo.ProduceRequestTimeout).(time.Duration); ok {
		eff["request.timeout.ms"] = millis(d)
	}
	if d, ok := cl.OptValue(kgo.RecordDeliveryTimeout).(time.Duration); ok {
		eff["delivery.timeout.ms"] = millis(d) // 0: none (kgo's default)
		if s.idempotent && d > 0 {
			eff["delivery.timeout.in.flight"] = "waits" // kgo fails no in-flight idempotent record at the timeout
		}
	}
	if n, ok := cl.OptValue(kgo.RecordRetries).(int64); ok {
		eff["retries"] = strconv.FormatInt(min(n, math.MaxInt32), 10)
	} else if n, ok := cl.OptValue(kgo.RecordRetries).(int); ok {
		eff["retries"] = strconv.FormatInt(min(int64(n), math.MaxInt32), 10)
	}
	if n, ok := cl.OptValue(kgo.RequestRetries).(int); ok {
		eff["request.retries"] = strconv.Itoa(n)
	}
	if codecs, ok := cl.OptValue(kgo.ProducerBatchCompression).([]kgo.CompressionCodec); ok {
		eff["compression.type"] = codecName(codecs)
	}
	if n, ok := cl.OptValue(kgo.ProducerBatchMaxBytes).(int32); ok {
		eff["batch.size"] = strconv.Itoa(int(n))
	}
	if n, ok := cl.OptValue(kgo.MaxBufferedRecords).(int64); ok {
		eff["buffer.records"] = strconv.FormatInt(n, 10)
	} else if n, ok := cl.OptValue(kgo.MaxBufferedRecords).(int); ok {
		eff["buffer.records"] = strconv.Itoa(n)
	}
	if id, ok := cl.OptValue(kgo.ClientID).(string); ok {
		eff["client.id"] = id
	}
	eff["partitioner"] = "kgo default (murmur2 on the key, as Java)"
	if s.txnID != "" {
		eff["transactional.id"] = s.txnID
		if d, ok := cl.OptValue(kgo.TransactionTimeout).(time.Duration); ok {
			eff["transaction.timeout.ms"] = millis(d)
		}
		eff["max.block.ms"] = millis(s.maxBlock)
	}
	return eff
}

// codecName is the codec kgo uses first (it falls back along the list for old brokers).
func codecName(codecs []kgo.CompressionCodec) string {
	if len(codecs) == 0 {
		return "none"
	}
	for _, name := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		if c, _ := compression(name); fmt.Sprint(c) == fmt.Sprint(codecs[0]) {
			return name
		}
	}
	return fmt.Sprint(codecs[0])
}
