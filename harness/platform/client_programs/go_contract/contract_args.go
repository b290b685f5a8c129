package main

// The client-program contract's plumbing both Go programs share (docs/clients.md, "The
// client-program contract"): the arguments, the stdout lines, the values, the member's
// journals, the stop signals and the watch on stdin, and the transactions' plan. What talks to
// a library stays in each program's folder (franz_go/, sarama/).
//
// The build copies these files beside the program's own (harness/platform/client_builds.py),
// so they compile as part of its package main: standard library only, every file named
// contract_*.go, and no name a program defines itself. Where the two programs have always
// worded or done a thing differently, the helper takes the difference as a parameter or the
// thing stays in the program: moving code here changes nothing a program prints or does.

import (
	"fmt"
	"strings"
)

// args are the program's `--name value` pairs.
type args map[string]string

// parseArgs reads the contract's `--name value` pairs (a name given twice: the last value).
// strict also refuses a name without its "--" and shows the pairs' form when a word is left
// over: franz-go's program has always been strict, Sarama's not, each with its own wording.
func parseArgs(argv []string, strict bool) (args, error) {
	if len(argv)%2 != 0 {
		if strict {
			return nil, fmt.Errorf("arguments come in pairs (--name value), got %d words", len(argv))
		}
		return nil, fmt.Errorf("arguments come in pairs, got %d words", len(argv))
	}
	a := args{}
	for i := 0; i < len(argv); i += 2 {
		if strict && !strings.HasPrefix(argv[i], "--") {
			return nil, fmt.Errorf("expected --name, got %q", argv[i])
		}
		a[argv[i]] = argv[i+1]
	}
	return a, nil
}

// get is the argument's value, or fallback when it was not given.
func (a args) get(name, fallback string) string {
	if v, ok := a[name]; ok {
		return v
	}
	return fallback
}

// need is an argument the role cannot run without; its absence is a usage error (exit 2).
func (a args) need(name string) (string, error) {
	v, ok := a[name]
	if !ok {
		return "", fmt.Errorf("missing argument %s", name)
	}
	return v, nil
}
