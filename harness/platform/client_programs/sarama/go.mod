module kchaos/sarama

go 1.24

require github.com/IBM/sarama v1.61.1
