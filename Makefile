# Missive: `make demo` (embedded default, nothing to install) and `make test` (real services).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
SHELL := /bin/bash

# The services `make test` runs against (scripts/services starts them on loopback).
TEST_ENV := DATABASE_URL=mysql://missive:missive@127.0.0.1:3306/missive \
	DATABASE_REPLICA_URL=mysql://missive:missive@127.0.0.1:3307/missive \
	REDIS_URL=redis://127.0.0.1:6379/2 CELERY_BROKER_URL=redis://127.0.0.1:6379/3 \
	HBASE_THRIFT_HOST=127.0.0.1 HBASE_THRIFT_PORT=9090 HBASE_THRIFT2_PORT=9091 \
	HBASE_TABLE_PREFIX=test_missive BULK_BATCH_SIZE=1000
# (BULK_BATCH_SIZE: scenarios of a few thousand recipients span several batches; the product's
# default, 4,000, is chosen in config/settings.py and exercised by scripts/bench_fanout.py.)
# The second pass: the suites that touch Redis again, with every data key on the Redis Cluster
# (scripts/services: :7000-7005); the Celery broker stays on the plain Redis above. The HTTP
# suites of 1:1 and group messages run on the one Redis only: their Redis calls are those of the
# service suites below, which run on both.
# The cluster pass runs beside the single-node pass's tests that leave the shared services alone
# (not marked `faults`), so it has a test database, a broker database and HBase tables of its own.
CLUSTER_ENV := REDIS_CLUSTER=1 REDIS_URL=redis://127.0.0.1:7000/0 \
	DATABASE_URL=mysql://missive:missive@127.0.0.1:3306/missive_cluster \
	DATABASE_REPLICA_URL=mysql://missive:missive@127.0.0.1:3307/missive_cluster \
	CELERY_BROKER_URL=redis://127.0.0.1:6379/4 HBASE_TABLE_PREFIX=test_missive_cluster
CLUSTER_TESTS := tests/storage/test_counters.py \
	tests/messaging/test_counters_epoch.py \
	tests/messaging/test_convcache.py tests/messaging/test_convcache_prewarm.py \
	tests/messaging/test_services.py tests/bulk/test_fanout.py tests/bulk/test_quotas.py \
	tests/bulk/test_recall.py \
	tests/groups/test_services.py tests/groups/test_unread.py \
	tests/unread tests/config/test_asgi.py tests/bulk/test_api_control.py \
	tests/bulk/test_api_workers.py tests/live/test_services.py \
	tests/bulk/test_workers.py::test_kill_minus_nine_mid_campaign_recovers_in_seconds_exactly_once \
	tests/infra/test_refused_writes.py
# The tests marked `faults` take a store out (freeze, kill, stop, cut off, stop replicating): they
# run on a MariaDB, replica and Redis of their own (scripts/services' SERVICES_SET), beside the
# rest; those that take the one shared HBase out (`hbase_faults`) run last, alone.
FAULTS_SET := SERVICES_SET=faults SERVICES_MARIADB_PORT=3316 SERVICES_REPLICA_PORT=3317 \
	SERVICES_REDIS_PORT=6380
FAULTS_ENV := $(FAULTS_SET) DATABASE_URL=mysql://missive:missive@127.0.0.1:3316/missive \
	DATABASE_REPLICA_URL=mysql://missive:missive@127.0.0.1:3317/missive \
	REDIS_URL=redis://127.0.0.1:6380/2 CELERY_BROKER_URL=redis://127.0.0.1:6380/3 \
	HBASE_TABLE_PREFIX=test_missive_faults
# Failovers on purpose, each in a process of its own: after one, the test process's cluster client
# answers ReadOnlyError to the suites that follow it (a fresh process is fine).
CLUSTER_FAILOVERS := tests/infra/test_redis_cluster.py tests/api/test_cluster_freeze.py \
	tests/live/test_cluster_failover.py

.PHONY: demo demo-admin test test-cluster test-faults lint services-up services-down bench clean

$(VENV)/bin/activate:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip wheel

# The demo's install path: no mysqlclient (it needs MariaDB's headers), no servers.
# Both install paths take the tested versions from constraints.txt (pip freeze of the test venv).
$(VENV)/.demo: $(VENV)/bin/activate pyproject.toml constraints.txt
	$(PY) -m pip install -q -e . -c constraints.txt
	touch $@

$(VENV)/.test: $(VENV)/bin/activate pyproject.toml constraints.txt
	$(PY) -m pip install -q -e '.[mysql,server,dev]' -c constraints.txt
	touch $@ $(VENV)/.demo

demo: $(VENV)/.demo
	env -u DATABASE_URL -u REDIS_URL -u CELERY_BROKER_URL -u INBOX_BACKEND $(PY) scripts/demo.py

# Django admin on the demo's data (var/), login operator / operator; Ctrl-C stops it.
demo-admin: $(VENV)/.demo
	$(PY) scripts/demo_admin.py

services-up:
	PYTHON=$(PY) scripts/services up

services-down:
	scripts/services down

test: $(VENV)/bin/activate
	PYTHON=$(PY) scripts/services up
	@# The browser, promtool (Debian packages), toxiproxy (go install) and the fault tests' own
	@# MariaDB, replica and Redis come up while the virtualenv installs and lint runs, which use
	@# neither apt nor Go: on a fresh machine that hides the browser's ~100 MB install and
	@# toxiproxy's ~30-s build.
	{ scripts/browser up && scripts/promtool up && scripts/services install toxiproxy \
	  && $(FAULTS_SET) PYTHON=$(PY) scripts/services up; } > var/tools-up.log 2>&1 & tools=$$!; \
	$(MAKE) lint; lint=$$?; wait $$tools; tools=$$?; cat var/tools-up.log; \
	[ $$lint -eq 0 ] && [ $$tools -eq 0 ]
	@# The single-node tests and, beside them, one after the other: the Redis Cluster's pass and
	@# failovers, then the fault tests on their own stores (their output follows). Then the
	@# tests that take the shared HBase out, alone. Half of each part is waiting (vmstat: ~45%
	@# idle on 2 cores). Measured on one day's machine: each part in turn ~27 min; BENCHMARKS.md
	@# has this order's time.
	{ $(MAKE) --no-print-directory test-cluster && $(MAKE) --no-print-directory test-faults; } \
	  > var/beside.log 2>&1 & beside=$$!; \
	$(TEST_ENV) $(PY) -m pytest -p no:cacheprovider -m "not redis_cluster and not faults" \
	  $(PYTEST_ARGS); single=$$?; wait $$beside; beside=$$?; \
	echo "== the Redis Cluster's pass and failovers, then the fault tests (beside the tests above)"; \
	cat var/beside.log; [ $$single -eq 0 ] && [ $$beside -eq 0 ]
	$(TEST_ENV) $(PY) -m pytest -p no:cacheprovider -m "hbase_faults and not redis_cluster" \
	  $(PYTEST_ARGS)

# The fault tests but those of HBase, on their own MariaDB, replica and Redis (started here when
# `make test` has not already); `make test` runs it beside the single-node tests.
test-faults: $(VENV)/.test
	$(FAULTS_SET) PYTHON=$(PY) scripts/services up > /dev/null
	$(TEST_ENV) $(FAULTS_ENV) $(PY) -m pytest -p no:cacheprovider \
	  -m "faults and not hbase_faults and not redis_cluster" $(PYTEST_ARGS)

# The Redis Cluster's suites, then its failovers (each in a process of its own); `make test`
# runs it beside the single-node tests.
test-cluster: $(VENV)/.test
	$(TEST_ENV) $(CLUSTER_ENV) $(PY) -m pytest -p no:cacheprovider $(CLUSTER_TESTS) $(PYTEST_ARGS)
	for f in $(CLUSTER_FAILOVERS); do $(TEST_ENV) $(CLUSTER_ENV) $(PY) -m pytest -p no:cacheprovider $$f $(PYTEST_ARGS) || exit 1; done

lint: $(VENV)/.test
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy .

clean:
	rm -rf $(VENV) var/missive.sqlite3*
