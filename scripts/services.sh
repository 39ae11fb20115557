#!/usr/bin/env bash
# The servers TDP's tests use besides its embedded PostgreSQL: Redis (the gateway's multi-node engine)
# and NATS with JetStream (the event bus), both on 127.0.0.1, plus Debian's Chromium for page tests,
# Debian's PostgreSQL server and client (pg_basebackup, pg_ctl promote and WAL archiving: the failover and
# restore drills start their own clusters with them), redis-sentinel (the Sentinel drills start their own)
# and Centrifugo v6 and Temporal CLI binaries (built from the Go module proxy; the tests start them themselves).
# Installs from Debian's packages what is missing, starts what is not answering, and waits until both
# accept connections. Safe to run again: a server already answering is left alone.
set -euo pipefail

state_dir="${TDP_SERVICES_DIR:-${TMPDIR:-/tmp}/tdp-services}"
mkdir -p "$state_dir"

missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v nats-server >/dev/null 2>&1 || missing+=(nats-server)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v redis-sentinel >/dev/null 2>&1 || missing+=(redis-sentinel)
ls /usr/lib/postgresql/*/bin/pg_basebackup >/dev/null 2>&1 || missing+=(postgresql postgresql-client)
if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "services.sh: install ${missing[*]} (as root: apt-get install -y ${missing[*]})" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Centrifugo, built with Go into $(go env GOPATH)/bin unless the version there is already this one (the
# Go caches make a rebuild cheap; the first build takes a few minutes). test/centrifugo.ts looks there.
centrifugo_version=v6.9.1
command -v go >/dev/null 2>&1 || PATH="$PATH:/usr/local/go/bin"
if ! command -v go >/dev/null 2>&1; then
  # Centrifugo v6.9.1 needs Go 1.26 (Debian's golang-go is older): the machine's own Go builds it.
  echo "services.sh: Go 1.26 or newer is needed to build Centrifugo $centrifugo_version" >&2
  exit 1
fi
go_bin="$(go env GOBIN)"
centrifugo_bin="${go_bin:-$(go env GOPATH | cut -d: -f1)/bin}/centrifugo"
# `go install` leaves Centrifugo's own version string unset (v0.0.0): the module version in the binary's
# build information says which one it is.
if ! { [[ -x "$centrifugo_bin" ]] && go version -m "$centrifugo_bin" 2>/dev/null |
  grep -Eq "^\s+mod\s+github.com/centrifugal/centrifugo/v6\s+$centrifugo_version\s"; }; then
  echo "services.sh: building Centrifugo $centrifugo_version (go install)" >&2
  go install "github.com/centrifugal/centrifugo/v6@$centrifugo_version"
fi

# The Temporal CLI, whose `temporal server start-dev` the Temporal engine's tests start (in memory, on
# 127.0.0.1). The first build compiles Temporal's server: several minutes; then the Go caches serve it.
temporal_version=v1.5.1
temporal_bin="${go_bin:-$(go env GOPATH | cut -d: -f1)/bin}/temporal"
if ! { [[ -x "$temporal_bin" ]] && go version -m "$temporal_bin" 2>/dev/null |
  grep -Eq "^\s+mod\s+github.com/temporalio/cli\s+$temporal_version\s"; }; then
  echo "services.sh: building the Temporal CLI $temporal_version (go install)" >&2
  go install "github.com/temporalio/cli/cmd/temporal@$temporal_version"
fi

answers() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_for() { # name port
  for _ in $(seq 1 100); do
    answers "$2" && return 0
    sleep 0.1
  done
  echo "services.sh: $1 did not start on 127.0.0.1:$2 (log: $state_dir/$1.log)" >&2
  exit 1
}

if ! answers 6379; then
  redis-server --bind 127.0.0.1 --port 6379 --save '' --appendonly no --daemonize yes \
    --logfile "$state_dir/redis.log" --dir "$state_dir"
fi
wait_for redis 6379

if ! answers 4222; then
  mkdir -p "$state_dir/jetstream"
  nohup nats-server -js -a 127.0.0.1 -p 4222 -sd "$state_dir/jetstream" </dev/null >"$state_dir/nats.log" 2>&1 &
fi
wait_for nats 4222

echo "Redis  redis://127.0.0.1:6379"
echo "NATS   nats://127.0.0.1:4222 (JetStream, data in $state_dir/jetstream)"
echo "Centrifugo $centrifugo_version $centrifugo_bin"
echo "Temporal CLI $temporal_version $temporal_bin (the tests start its dev server)"
