module kchaos/franzgo

go 1.25.0

require github.com/twmb/franz-go v1.22.3
