package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/IBM/sarama"
	"github.com/eapache/go-resiliency/breaker"
)

// sentinels are Sarama's own error values by the names Sarama exports them under (those
// every IBM/sarama release has).
var sentinels = []struct {
	err  error
	name string
}{
	{sarama.ErrOutOfBrokers, "sarama.ErrOutOfBrokers"},
	{sarama.ErrBrokerNotFound, "sarama.ErrBrokerNotFound"},
	{sarama.ErrClosedClient, "sarama.ErrClosedClient"},
	{sarama.ErrIncompleteResponse, "sarama.ErrIncompleteResponse"},
	{sarama.ErrInvalidPartition, "sarama.ErrInvalidPartition"},
	{sarama.ErrAlreadyConnected, "sarama.ErrAlreadyConnected"},
	{sarama.ErrNotConnected, "sarama.ErrNotConnected"},
	{sarama.ErrInsufficientData, "sarama.ErrInsufficientData"},
	{sarama.ErrShuttingDown, "sarama.ErrShuttingDown"},
	{sarama.ErrMessageTooLarge, "sarama.ErrMessageTooLarge"},
	{sarama.ErrControllerNotAvailable, "sarama.ErrControllerNotAvailable"},
	{sarama.ErrNoTopicsToUpdateMetadata, "sarama.ErrNoTopicsToUpdateMetadata"},
	{sarama.ErrAddPartitionsToTxn, "sarama.ErrAddPartitionsToTxn"},
	{sarama.ErrTxnOffsetCommit, "sarama.ErrTxnOffsetCommit"},
	{sarama.ErrTransactionNotReady, "sarama.ErrTransactionNotReady"},
	{sarama.ErrNonTransactedProducer, "sarama.ErrNonTransactedProducer"},
	{sarama.ErrTransitionNotAllowed, "sarama.ErrTransitionNotAllowed"},
	{sarama.ErrCannotTransitionNilError, "sarama.ErrCannotTransitionNilError"},
	{sarama.ErrTxnUnableToParseResponse, "sarama.ErrTxnUnableToParseResponse"},
	{sarama.ErrClosedConsumerGroup, "sarama.ErrClosedConsumerGroup"},
	// Sarama's circuit breaker (a topic's partitioning after repeated metadata failures)
	{breaker.ErrBreakerOpen, "breaker.ErrBreakerOpen"},
	// a connection closed under a request (Sarama returns it as the send's error)
	{io.EOF, "io.EOF"},
	{io.ErrUnexpectedEOF, "io.ErrUnexpectedEOF"},
}

// kafkaCode is the Kafka protocol error code an error carries (a broker's answer), if any.
func kafkaCode(err error) (int16, bool) {
	var kerr sarama.KError
	if errors.As(err, &kerr) {
		return int16(kerr), true
	}
	return 0, false
}

// errorName names an error as Sarama does: sarama.KError for a broker's protocol error (its
// code goes in error_code), the exported name of a sentinel error Sarama returns, else the
// Go type of the error (a network error: *net.OpError), or for an anonymous errors.New its
// text.
func errorName(err error) string {
	if err == nil {
		return "nil"
	}
	if _, ok := kafkaCode(err); ok {
		return "sarama.KError"
	}
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			return s.name
		}
	}
	var cfgErr sarama.ConfigurationError
	if errors.As(err, &cfgErr) {
		return "sarama.ConfigurationError"
	}
	name := fmt.Sprintf("%T", err)
	if name == "*errors.errorString" { // an unexported errors.New: its text is its only name
		return fmt.Sprintf("errors.New(%q)", err.Error())
	}
	return name
}

// describe is an error's name and text, for a transaction's error.
func describe(err error) string {
	if code, ok := kafkaCode(err); ok {
		return fmt.Sprintf("%s(%d): %v", errorName(err), code, err)
	}
	return fmt.Sprintf("%s: %v", errorName(err), err)
}
