#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# What a container costs a step (docs/containers.md): inside a held 8-node
# allocation of the demo cluster (emulated nodes), `srun -N K sh -c :`
# from its start to its end, on the host and with --container-image of a
# warm cache, K = 1 and 8, in alternating order; and a cold pull (the
# cache emptied first) of the test image from a local registry (Debian's
# docker-registry, TLS and a login, as in tests/integration/container_test.sh).
# Prints medians and the container ÷ host ratio. Needs root (mounts).
# Usage: bench/container_start.sh [BUILD_DIR] [ROUNDS]
root=$(cd "$(dirname "$0")/.." && pwd)
rounds=${2:-15}
set -- "${1:-$root/build/default}" "$root"
source "$root/tests/integration/lib.sh"
source "$root/tests/integration/registry_lib.sh"
export PATH="$BIN/cli/slurm:$BIN/cli:$PATH"
CREDENTIALS=$WORK/credentials
EXTRA_CONF="ContainerRegistryCAFile=$WORK/tls/ca.pem
ContainerCredentialsFile=$CREDENTIALS"
start_cluster
start_registry "$WORK/registry" || { fail "the registry did not start"; finish_test; }
push_tiny_image tiny 1 || { fail "could not push the tiny image"; finish_test; }
printf 'machine %s login %s password %s\n' "$REGISTRY" "$REGISTRY_USER" "$REGISTRY_PASSWORD" \
  >"$CREDENTIALS"
chmod 600 "$CREDENTIALS"

cat >"$WORK/inner.sh" <<'INNER'
#!/usr/bin/env bash
# Runs inside the allocation: one line per measurement, "KIND NODES MS".
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
image=$1 rounds=$2 cache=$3
# The cold pull first: an empty cache on the one node it runs on.
rm -rf "$cache"
s=$(date +%s%N); srun -N 1 --container-image="$image" sh -c : || exit 1
echo "cold 1 $(ms "$s")"
srun -N 8 --container-image="$image" sh -c : || exit 1  # every node warm
for ((i = 0; i < rounds; i++)); do
  for nodes in 1 8; do
    # ABBA: host, container, container, host.
    for kind in host container container host; do
      args=()
      [ "$kind" = container ] && args=(--container-image="$image")
      s=$(date +%s%N); srun -N "$nodes" "${args[@]}" sh -c : || exit 1
      echo "$kind $nodes $(ms "$s")"
    done
  done
done
INNER
chmod +x "$WORK/inner.sh"
cohort alloc -N 8 -- "$WORK/inner.sh" "$REGISTRY#tiny:1" "$rounds" "$WORK/spool/images" \
  >"$WORK/times" 2>"$WORK/alloc.err" || { fail "the allocation failed: $(tail -3 "$WORK/alloc.err")"; }

median() { sort -n | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]; else print "?"}'; }
echo "cold pull and start, 1 node: $(awk '$1=="cold"{print $3}' "$WORK/times") ms"
for nodes in 1 8; do
  host=$(awk -v n="$nodes" '$1=="host" && $2==n {print $3}' "$WORK/times" | median)
  ctr=$(awk -v n="$nodes" '$1=="container" && $2==n {print $3}' "$WORK/times" | median)
  echo "step of $nodes node(s), start to end, median of $((rounds * 2)): host ${host} ms," \
    "container ${ctr} ms, ratio $(awk -v a="$ctr" -v b="$host" 'BEGIN{printf "%.2f", a/b}')"
done
finish_test
