package main

// The messages of the producer role (KafkaChaosProducer.java's contract): keys taken in
// turn, values whose head names the message, read back by the member.

import (
	"fmt"
	"strconv"
	"time"
)

const (
	headBytes     = 29 // "%015d:%012d:", as harness/workload/values.py
	progressEvery = 200 * time.Millisecond
)

// workload is what the producer role sends: --topic, --keys, --id-base, --key-prefix and
// --message-bytes.
type workload struct {
	topic        string
	keys         int64
	idBase       int64
	keyPrefix    string
	messageBytes int
}

// key is message i's key: the producer's prefix, then the keys in turn ("k0", "k1", ...).
func (w *workload) key(i int64) []byte {
	return []byte(w.keyPrefix + "k" + strconv.FormatInt(i%w.keys, 10))
}

// head is the head of message i's value: its msg_id and its sequence number on its key,
// headBytes long while the msg_id stays below 10^15. The checker reads both back.
func (w *workload) head(i int64) string {
	return fmt.Sprintf("%015d:%012d:", w.idBase+i, i/w.keys)
}

// value is a message's value: head, then '.' up to --message-bytes (never shorter than
// headBytes).
func (w *workload) value(head string) []byte {
	value := make([]byte, max(w.messageBytes, headBytes))
	copy(value, head)
	for j := len(head); j < len(value); j++ {
		value[j] = '.'
	}
	return value
}

// msgID is the msg_id at the head of a value the harness wrote ("<msg_id>:<key_seq>:..."),
// -1 for any other value.
func msgID(value []byte) int64 {
	var id int64
	i := 0
	for ; i < len(value) && value[i] != ':'; i++ {
		if value[i] < '0' || value[i] > '9' || i >= 18 {
			return -1
		}
		id = id*10 + int64(value[i]-'0')
	}
	if i == 0 || i == len(value) {
		return -1
	}
	return id
}
