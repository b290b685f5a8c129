// kafka-chaos's Sarama client program: the client-program contract (docs/clients.md) on
// github.com/IBM/sarama, built by the harness at any Sarama release.
//
//	sarama produce <the Java recorder's arguments>   (produce.go, transactions.go)
//	sarama consume <the Java member's arguments>     (consume.go)
//
// stdout carries one JSON object a line (the verifiable-client protocol and the harness's
// extensions); stderr is the log (Sarama's own logger included), which the harness keeps in
// the run directory. The plumbing both Go programs share (the arguments, stdout, the values,
// the journals, the transactions' plan) is in ../go_contract, which the build copies beside
// these files.
package main

import (
	"fmt"
	"log"
	"os"
	"strings"

	"github.com/IBM/sarama"
)

const saramaModule = "github.com/IBM/sarama"

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: sarama produce|consume --name value ...")
		os.Exit(2)
	}
	sarama.Logger = log.New(os.Stderr, "[sarama] ", log.LstdFlags|log.Lmicroseconds)
	switch os.Args[1] {
	case "produce":
		os.Exit(runProduce(os.Args[2:]))
	case "consume":
		os.Exit(runConsume(os.Args[2:]))
	default:
		fmt.Fprintf(os.Stderr, "unknown role %q: produce or consume\n", os.Args[1])
		os.Exit(2)
	}
}

// brokerList is a bootstrap-server argument (host:port,host:port,...) as Sarama's addresses.
func brokerList(bootstrap string) []string {
	var brokers []string
	for _, b := range strings.Split(bootstrap, ",") {
		if b = strings.TrimSpace(b); b != "" {
			brokers = append(brokers, b)
		}
	}
	return brokers
}
