# SPDX-License-Identifier: Apache-2.0
# Sourced by the demo, the integration tests and the benchmarks: a cluster's
# credentials made on the spot, in a folder of the caller's, as an operator
# makes them once (docs/operations.md#security): a private munged with a
# MUNGE key of its own, and a CA that signs certificates (EC P-256). Each
# function returns non-zero on failure; what the tools said is in the
# folder's *.log.

# start_munged DIR: munged in the foreground (the caller stops it by
# $MUNGED_PID), its key, socket ($DIR/munge.socket), log and seed in DIR.
# munged wants every folder above its socket reachable by every user.
start_munged() {
  local dir=$1
  mkdir -p "$dir" && chmod 755 "$dir" || return 1
  head -c 1024 /dev/urandom >"$dir/munge.key" && chmod 600 "$dir/munge.key" || return 1
  munged --foreground --key-file="$dir/munge.key" --socket="$dir/munge.socket" \
    --pid-file="$dir/munged.pid" --log-file="$dir/munged.log" --seed-file="$dir/munged.seed" \
    >>"$dir/munged.out" 2>&1 &
  MUNGED_PID=$!
  local _
  for _ in $(seq 100); do [ -S "$dir/munge.socket" ] && return 0; sleep 0.1; done
  cat "$dir/munged.out" >&2
  return 1
}

# make_ca DIR NAME: a CA certificate ($DIR/ca.pem, world-readable) and its
# key ($DIR/ca.key), valid two days.
make_ca() {
  local dir=$1
  mkdir -p "$dir" && chmod 755 "$dir" || return 1
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj "/CN=$2" -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" -keyout "$dir/ca.key" -out "$dir/ca.pem" \
    2>>"$dir/openssl.log" && chmod 644 "$dir/ca.pem"
}

# sign_certificate DIR NAME SANS: $DIR/NAME.pem (world-readable) and
# $DIR/NAME.key, signed by DIR's CA, for the subjectAltName SANS (such as
# IP:127.0.0.1,DNS:localhost).
sign_certificate() {
  local dir=$1 name=$2
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$name" \
    -keyout "$dir/$name.key" -out "$dir/$name.csr" 2>>"$dir/openssl.log" &&
    openssl x509 -req -in "$dir/$name.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" \
      -CAcreateserial -days 2 -extfile <(echo "subjectAltName=$3") -out "$dir/$name.pem" \
      2>>"$dir/openssl.log" && chmod 644 "$dir/$name.pem"
}
