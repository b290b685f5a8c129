# kafka-chaos: `make run` (the default experiment end to end) and `make test`.
# Both bootstrap what they need: Java 17 and Maven, Docker engine, virtualenv, broker image.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
EXPERIMENT ?= experiments/default.yaml

.PHONY: run test chaos-test test-all docs tools base-tools browser unit integration fuzz lint bench mutation mutation-survivors mutation-clean image engine compose clean venv cluster-check

run: tools venv engine image
	$(BIN)/kafka-chaos run $(EXPERIMENT)

# The gate (what CI runs on every change): the unit tests first, failing fast, while the
# broker image builds beside them, then the real-broker tests marked `integration`.
# tests/stage.sh turns pytest's exit 5 (no test collected) into a failure.
test: tools browser venv engine
	bash tests/stage.sh gate

# The chaos stage (nightly in .github/workflows/chaos.yml, and before a release): the
# real-broker tests marked `chaos`. docs/testing.md lists what each stage proves.
chaos-test: tools venv engine
	bash tests/stage.sh chaos

test-all: tools browser venv engine
	bash tests/stage.sh all

# The documentation site from docs/ (MkDocs, Material theme), built strict: a broken link or
# a page left out of mkdocs.yml's nav fails the build (tests/unit/test_docs_site.py in CI).
docs: venv
	$(BIN)/mkdocs build --strict --site-dir site

# What the harness runs beside Python: a JDK 17 (Spark; the Java client compiles its
# programs), Maven (the Kafka jars), Go (the franz-go and Sarama clients' programs) and Node.js
# with npm (the KafkaJS client's), installed with apt-get when missing, as root or through
# passwordless sudo (a stock CI runner has it); otherwise the missing ones are named. Debian's
# Go is older than the clients need: the go command then fetches the toolchain their go.mod
# names from the Go module proxy by itself.
TOOLS := mvn:maven javac:openjdk-17-jdk-headless go:golang-go node:nodejs npm:npm
# mmdebstrap makes the broker image's JRE base from the machine's own Debian sources, with no
# registry. Optional: installed the same way on Debian only (its bookworm base needs Debian's
# archive); elsewhere, or when it cannot be installed, `kafka-chaos image` builds the base
# from compose/Dockerfile.base instead, which pulls debian:bookworm-slim from a registry.
BASE_TOOLS := mmdebstrap:mmdebstrap
# What the unit tests' browser test (tests/unit/test_report_browser.py) opens report.html in:
# Debian's headless-capable Chromium and its WebDriver. Only the tests need them.
BROWSER := chromium:chromium chromedriver:chromium-driver

# $(call apt_missing,COMMAND:PACKAGE ...[,WHY OPTIONAL]): install the packages whose command is
# missing with apt-get, as root or with `sudo -n` (never a password prompt); otherwise name
# them and fail, or, given WHY OPTIONAL, say it and go on. Nothing to do (no apt-get call) when
# all are there, so it is cheap to repeat.
define apt_missing
	@need=(); for pair in $(1); do \
	  command -v "$${pair%%:*}" >/dev/null || need+=("$${pair#*:}"); done; \
	if [ $${#need[@]} -gt 0 ]; then \
	  if [ "$$(id -u)" = 0 ]; then as_root=(env); how="apt-get"; \
	  elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then \
	    as_root=(sudo -n env); how="sudo apt-get"; \
	  else as_root=(); fi; \
	  if [ $${#as_root[@]} -gt 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing $${need[*]} with $$how"; \
	    "$${as_root[@]}" apt-get update -qq && "$${as_root[@]}" DEBIAN_FRONTEND=noninteractive \
	      apt-get install -y -qq --no-install-recommends "$${need[@]}" >/dev/null \
	    || { [ -n "$(2)" ] && echo "could not install $${need[*]}: $(2)"; } || exit 1; \
	  elif [ -n "$(2)" ]; then \
	    echo "missing: $${need[*]} (not root, no passwordless sudo): $(2)"; \
	  else \
	    echo "missing: $${need[*]}; install them (Debian: apt-get install $${need[*]}), or run as root or with passwordless sudo" >&2; \
	    exit 1; \
	  fi; \
	fi
endef

BASE_FALLBACK := the broker image's JRE base is then built from compose/Dockerfile.base (a registry)

tools:
	$(call apt_missing,$(TOOLS))
	@if grep -qx 'ID=debian' /etc/os-release 2>/dev/null; then :; \
	else echo "mmdebstrap: not used on this system (not Debian): $(BASE_FALLBACK)"; exit 0; fi; \
	$(MAKE) --no-print-directory base-tools

base-tools:
	$(call apt_missing,$(BASE_TOOLS),$(BASE_FALLBACK))

browser:
	$(call apt_missing,$(BROWSER))

unit: browser venv
	$(BIN)/python -m pytest -ra tests/unit

integration: venv engine image
	$(BIN)/python -m pytest -ra -m integration tests/integration

# The property tests (tests marked `property`) with hypothesis's deep profile: tens of
# thousands of generated examples each instead of CI's few hundred. Minutes, never in CI.
fuzz: venv
	HYPOTHESIS_PROFILE=deep $(BIN)/python -m pytest -ra -m property tests/unit

lint: venv
	$(BIN)/ruff check .

bench: venv engine image
	$(BIN)/python bench/cluster_bench.py
	$(BIN)/python bench/metadata_reads.py
	$(BIN)/python bench/recorder_bench.py
	$(BIN)/python bench/reconcile_bench.py --sizes 1000000,10000000
	$(BIN)/python bench/checks_bench.py --sizes 1000000
	$(BIN)/python bench/availability_bench.py
	$(BIN)/python bench/recording_bench.py
	$(BIN)/python bench/scale_bench.py --sizes 1000000,10000000 --whole-max 10000000

# The reconciliation on a Spark standalone cluster (master + 2 workers on 127.0.0.1, from
# pyspark's jars), compared with local mode; RUNS is any run directory or a parent of many.
RUNS ?= runs/*/latest

cluster-check: venv
	$(BIN)/kafka-chaos cluster-check $(RUNS)

# Mutation testing of the checker's pure modules (the judge: analysis/judge/verdicts.py,
# findings.py, contract.py, cell.py, guarantees.py, anomalies.py; the message check:
# analysis/checks/messages/; the report: analysis/report/) against their unit tests without
# Spark, the property tests on the small `mutation` hypothesis profile; configured in
# pyproject.toml [tool.mutmut]. The first run takes hours for its 6,500-odd mutants on 2
# cores (docs/benchmarks.md), so never in CI; it may be stopped and started again. mutmut
# keeps each mutant's result in mutants/ and tests again only the mutants of the functions
# that changed since, so later runs take minutes. New tests do not reach a survivor by
# themselves: `make mutation-survivors` tests every survivor again on the current tests.
# `make mutation-clean` forgets every result. Fails below MUTATION_MIN percent killed.
MUTATION_JOBS ?= 2
MUTATION_MIN ?= 95
MUTATION_STAMP := $(VENV)/.mutation-installed
MUTMUT := HYPOTHESIS_PROFILE=mutation $(BIN)/mutmut run --max-children $(MUTATION_JOBS)

mutation: $(MUTATION_STAMP)
	mkdir -p mutants
	@start=$$SECONDS; $(MUTMUT) >>mutants/run.log 2>&1 \
	  || { tail -n 30 mutants/run.log >&2; echo "mutmut run failed: see mutants/run.log" >&2; exit 1; }; \
	  echo "mutmut ran in $$((SECONDS - start)) s (log: mutants/run.log)"
	$(BIN)/python bench/mutation_score.py --fail-under $(MUTATION_MIN)

mutation-survivors: $(MUTATION_STAMP)
	$(BIN)/python bench/mutation_score.py --write-survivors mutants/survivors.txt >/dev/null || true
	@test -s mutants/survivors.txt || { echo "no survivors to test again"; exit 0; }; \
	  xargs -n 80 sh -c '$(MUTMUT) "$$@" >>mutants/run.log 2>&1' mutmut <mutants/survivors.txt \
	  || { tail -n 30 mutants/run.log >&2; echo "mutmut run failed: see mutants/run.log" >&2; exit 1; }
	$(BIN)/python bench/mutation_score.py --fail-under $(MUTATION_MIN)

mutation-clean:
	rm -rf mutants

$(MUTATION_STAMP): $(STAMP)
	$(BIN)/pip install -q -c constraints.txt -e '.[dev,mutation]'
	touch $(MUTATION_STAMP)

venv: $(STAMP)

# constraints.txt is the lock: every dependency at the version the project is tested with.
$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt -e '.[dev]'
	touch $(STAMP)

# Standard library only, so it runs before the virtualenv matters.
engine:
	$(PYTHON) -m harness.platform.engine

# Docker Compose v2 for compose/docker-compose.yml, into ~/.cache/kafka-chaos (stdlib + pip).
compose: venv
	$(BIN)/python -m harness.platform.compose

image: tools venv engine
	$(BIN)/kafka-chaos image

clean: venv
	$(BIN)/kafka-chaos clean
