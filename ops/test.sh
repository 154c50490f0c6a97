#!/usr/bin/env bash
# Installs what the tests need and runs the whole suite. Used by CI (.ci/run) and by
# newcomers: `bash ops/test.sh` (extra arguments go to pytest).
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages the suite uses: RabbitMQ (normally already running), Chromium for the
# recipient-page and console browser tests, npm to fetch axe-core for the console's,
# libfaketime for the scheduler run on a test-controlled clock. Installed only when missing.
need_apt=()
command -v rabbitmq-server >/dev/null 2>&1 || need_apt+=(rabbitmq-server)
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
command -v npm >/dev/null 2>&1 || need_apt+=(npm)
ls /usr/lib/*/faketime/libfaketime.so.1 >/dev/null 2>&1 || need_apt+=(faketime)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
  else
    echo "missing Debian packages: ${need_apt[*]} (install them with apt-get)" >&2
  fi
fi

python3 -m venv .venv
.venv/bin/pip install -q --upgrade pip >/dev/null
.venv/bin/pip install -q -e '.[test]'

# The bounce corpus test reads the real-world samples that ship in flufl.bounce's source
# distribution (of the version installed), fetched from the package registry into a cache
# dir (never into the tree; .cache/ is ignored by git).
flufl_version=$(.venv/bin/python -c "import importlib.metadata as m; print(m.version('flufl.bounce'))")
if [ ! -f ".cache/flufl-bounce-sdist/flufl_bounce-${flufl_version}.tar.gz" ]; then
  .venv/bin/pip download -q --no-binary :all: --no-deps "flufl.bounce==${flufl_version}" -d .cache/flufl-bounce-sdist
fi

# The console's browser tests run axe-core (the npm package, version pinned in
# tests/support/axe.py) on every page: fetched from the npm registry into the cache dir.
axe_version=$(.venv/bin/python -c "from tests.support.axe import AXE_VERSION; print(AXE_VERSION)")
if [ ! -f ".cache/axe-core/axe-core-${axe_version}.tgz" ]; then
  mkdir -p .cache/axe-core && (cd .cache/axe-core && npm pack -q "axe-core@${axe_version}" >/dev/null)
fi

# The suite starts a few hundred Python processes (fronts, workers, stores); where the
# environment sets PYTHONDONTWRITEBYTECODE each of them would compile our modules anew.
.venv/bin/python -m compileall -q -j 0 front actors pipelines mongo ops bench tests >/dev/null

# RabbitMQ must be up; start the installed server if it is not.
if ! (exec 3<>/dev/tcp/127.0.0.1/5672) 2>/dev/null; then
  rabbitmq-server -detached || true
  for _ in $(seq 1 60); do (exec 3<>/dev/tcp/127.0.0.1/5672) 2>/dev/null && break; sleep 1; done
fi

# The tests make a RabbitMQ vhost per private stack through the management API (ms a
# vhost, against seconds a rabbitmqctl call); enable the plugin when it is off.
if ! (exec 3<>/dev/tcp/127.0.0.1/15672) 2>/dev/null; then
  if rabbitmq-plugins enable rabbitmq_management >/dev/null 2>&1; then
    for _ in $(seq 1 90); do (exec 3<>/dev/tcp/127.0.0.1/15672) 2>/dev/null && break; sleep 1; done
  fi
fi

# In three parallel processes (pytest-xdist; `POSTROOM_TEST_PROCESSES` changes it), each
# with its own store, vhost and processes: many e2e tests wait on their stacks' mail, so a
# third process uses the CPU two leave idle (2026-11-28, clean clones: 7 min 52 s for 3,072 tests; 8 min 30 s, 7 min 46 s and 8 min 26 s for 3,544 with inbound mail).
# A test file runs whole in one of them (`--dist loadfile`: its module-scoped stacks,
# fronts and seeded stores start once; xdist_group marks do nothing under pytest 9, whose
# node ids xdist 3.8 can no longer suffix with the group), files in the order
# tests/conftest.py gives them (the ones with processes spread among the fast ones);
# tests marked `quiet` (they measure time) take the run alone (tests/support/quiet_turns.py).
exec .venv/bin/python -m pytest -n "${POSTROOM_TEST_PROCESSES:-3}" --dist loadfile --no-loadscope-reorder "$@"
