# Millrace: `make run` starts a server, `make test` runs the suite; both set up first.
# `make run` installs only the server (pip install -e .); the targets that need
# Spark or the test tools add the `spark` and `dev` extras themselves.
VENV   ?= .venv
PY     := $(VENV)/bin/python
PORT   ?= 6379
DATA   ?= ./data
FSYNC  ?= everysec
# make test's worker processes (pytest-xdist, one test module per worker at a time, so each module
# keeps its own servers); JOBS=0 runs the suite in one process
JOBS   ?= 2

.PHONY: install install-spark install-dev run test lint bench crash-test pipeline clean ha-demo fuzz difffuzz

install: $(VENV)/.installed                # the server and its five libraries
install-spark: $(VENV)/.installed-spark    # + PySpark, pyarrow, pandas (the pipeline)
install-dev: $(VENV)/.installed-dev        # + Spark and the test tools, the Redis 8.2.3 oracle among them

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e .
	touch $@

$(VENV)/.installed-spark: $(VENV)/.installed
	$(PY) -m pip install -q -e '.[spark]'
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed
	$(PY) -m pip install -q -e '.[dev,spark]'
	touch $@ $(VENV)/.installed-spark

run: install  # durable by default: an AOF in $(DATA), fsynced every second (make run FSYNC=always)
	mkdir -p $(DATA)
	$(PY) -m server --port $(PORT) --dir $(DATA) --appendonly yes --appendfsync $(FSYNC)

test: install-dev
	$(PY) -m ruff check .
	$(PY) -m pytest -q -n $(JOBS) --dist loadfile $(PYTEST_ARGS)

lint: install-dev
	$(PY) -m ruff check .

ha-demo: install-dev  # a Millrace primary, two replicas and three redis-sentinel: kill -9 the primary, watch the failover
	$(PY) -m pytest -s -q -p no:cacheprovider tests/test_sentinel.py

bench: install-dev
	$(PY) -m bench $(BENCH_ARGS)

# A long run of mutated requests (issue 25; not part of `make test`): make fuzz FUZZ_ARGS="--requests 50000"
fuzz: install-dev
	$(PY) -m tests.fuzz $(FUZZ_ARGS)

# Seeded random stream and keyspace command sequences, Millrace against Redis 8.2.3 (not part of `make test`)
difffuzz: install-dev
	$(PY) -m tests.difffuzz --suite all --seeds 2000

crash-test: install
	$(PY) -m bench.crash_test

pipeline: install-spark
	$(PY) -m pipeline.jobs.run_all

# Mutation testing of storage/ and pipeline/ (mutmut 3, in a copy of the tree; not part of `make test`).
# A subset: make mutate MUTATE_PATHS="storage/consumer_group.py pipeline/partitioning.py"
mutate: install-dev
	$(PY) -m pip install -q 'mutmut>=3,<4'
	$(PY) -m tests.mutate $(if $(MUTATE_PATHS),--paths $(MUTATE_PATHS))

clean:
	rm -rf $(VENV) $(DATA) .pytest_cache
