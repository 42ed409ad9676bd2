#!/usr/bin/env bash
# Makes sure the servers the test suites use exist and run: nats-server on PATH (suites start their own
# on free ports; the shared one on 4222 is started too), PostgreSQL at TACKLE_TEST_PG, and Debian's
# chromium at /usr/bin/chromium for the console's browser tests.
# Installs from Debian's packages when missing (needs root). Prints `export` lines for anything it changed
# into the file named by $1 (default /dev/null), which .ci/run sources.
set -euo pipefail
env_out="${1:-/dev/null}"
: > "$env_out" 2>/dev/null || true
pg_url="${TACKLE_TEST_PG:-postgres://postgres@127.0.0.1:5432/test}"
apt_updated=""

apt_install() {
  if [ -z "$apt_updated" ]; then apt-get update -qq >&2; apt_updated=1; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >&2
}

# --- NATS -------------------------------------------------------------------
if ! command -v nats-server >/dev/null 2>&1 && [ ! -x /usr/sbin/nats-server ]; then
  echo "ensure-services: installing nats-server" >&2
  apt_install nats-server
fi
nats_bin="$(command -v nats-server || echo /usr/sbin/nats-server)"
if ! (exec 3<>/dev/tcp/127.0.0.1/4222) 2>/dev/null; then
  echo "ensure-services: starting nats-server on 127.0.0.1:4222" >&2
  mkdir -p /var/lib/nats-server
  start-stop-daemon --start --oknodo --background --exec "$nats_bin" -- \
    -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log
fi
echo "ensure-services: nats-server $("$nats_bin" --version 2>&1 | head -n1)" >&2

# --- Chromium (the console's browser tests drive it with playwright-core) ------
if [ ! -x /usr/bin/chromium ]; then
  echo "ensure-services: installing chromium" >&2
  apt_install chromium
fi
echo "ensure-services: $(/usr/bin/chromium --version 2>/dev/null | head -n1)" >&2

# --- PostgreSQL ---------------------------------------------------------------
pg_ready() { command -v psql >/dev/null 2>&1 && psql "$pg_url" -qtAc 'select 1' >/dev/null 2>&1; }
if ! pg_ready; then
  if [ ! -d /etc/postgresql ] || [ -z "$(ls /etc/postgresql 2>/dev/null)" ]; then
    echo "ensure-services: installing postgresql" >&2
    apt_install postgresql
  fi
  version="$(ls /etc/postgresql | sort -V | tail -n1)"
  echo "ensure-services: starting PostgreSQL $version" >&2
  pg_ctlcluster --skip-systemctl-redirect "$version" main start >&2 2>&1 || true
  for _ in $(seq 1 50); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 0.2; done
  if ! pg_ready; then
    # A fresh Debian cluster asks for a password over TCP: give the test user one and say so.
    echo "ensure-services: configuring a password and the database 'test'" >&2
    su postgres -c "psql -qc \"ALTER USER postgres PASSWORD 'postgres'\"" >&2
    su postgres -c "createdb test" >&2 2>&1 || true
    pg_url="postgres://postgres:postgres@127.0.0.1:5432/test"
    echo "export TACKLE_TEST_PG='$pg_url'" >> "$env_out"
  fi
fi
if ! pg_ready; then
  echo "ensure-services: PostgreSQL is still not reachable at $pg_url" >&2
  exit 1
fi
echo "ensure-services: PostgreSQL $(psql "$pg_url" -qtAc 'show server_version')" >&2
