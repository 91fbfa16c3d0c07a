#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Containers as pyxis runs them, from a real registry: Debian's Distribution
# registry on 127.0.0.1 with TLS from the test CA and htpasswd logins,
# holding a tiny busybox image in three layers (a marker file in the
# second, whiteouts in the third) that the test builds and pushes itself.
# - `srun --container-image=REGISTRY#tiny:1` over 2 nodes x 2 ranks: every
#   rank sees the image's files and not the host's, the two ranks of a node
#   share one mount namespace, SLURM_* and the image's variables are set.
# - The NGC line: srun --mpi=pmix with the image, mounts and workdir; the
#   stepds' PMIx servers wire up the ranks inside their containers.
# - --container-mounts (read-only and writable), --container-workdir,
#   --container-readonly against the default writable root, a named
#   container that a job's second step finds as the first left it, sbatch
#   --container-image (the script on the host, its srun in the container).
# - --container-save: the node of rank 0 saves the container's root, without
#   what was mounted into it, and the file runs as an image.
# - Pull-ahead: a 2-node job queued behind one holding every node has its
#   image in the cache, and says so, before it starts.
# - A wrong password, a missing tag and a missing mount source fail the
#   step with the registry's or the system's words; the cache keeps no
#   half image and the agent keeps running.
source "$(dirname "$0")/lib.sh"
source "$ROOT/tests/integration/registry_lib.sh"
for tool in /usr/bin/docker-registry /bin/busybox htpasswd; do
  [ -x "$tool" ] || command -v "$tool" >/dev/null || {
    fail "no $tool: run scripts/install-deps.sh (docker-registry, busybox-static, apache2-utils)"
    finish_test
  }
done
if [ "$(id -u)" != 0 ]; then
  echo "skip: containers need the agent to run as root (mounts and namespaces)"
  exit 77
fi

SLURM_BIN=$BIN/cli/slurm
export PATH="$SLURM_BIN:$BIN/cli:$PATH"
unset SLURM_JOB_ID SLURM_JOBID SLURM_NODELIST SLURM_CONF

# The registry's logins, as a site keeps them for every user.
CREDENTIALS=$WORK/credentials
# Two hooks, as a site's hooks.d brings the GPU driver in: each leaves its
# name in the container's root; the second fails while $WORK/hook-fails
# exists.
mkdir -m 755 "$WORK/hooks.d"
printf '#!/bin/sh\necho "10 pid=$ENROOT_PID" >"$COHORT_CONTAINER_ROOT/hooked"\n' >"$WORK/hooks.d/10-first"
printf '#!/bin/sh\n[ -e %s/hook-fails ] && { echo "driver not found" >&2; exit 3; }\necho 20 >>"$ENROOT_ROOTFS/hooked"\n' \
  "$WORK" >"$WORK/hooks.d/20-second"
chmod 755 "$WORK/hooks.d/10-first" "$WORK/hooks.d/20-second"
EXTRA_CONF="ContainerRegistryCAFile=$WORK/tls/ca.pem
ContainerCredentialsFile=$CREDENTIALS
ContainerHooksDir=$WORK/hooks.d"
IT_HTTP=on start_cluster
start_registry "$WORK/registry" || { fail "the registry did not start"; finish_test; }
push_tiny_image tiny 1 || { fail "could not push the tiny image"; finish_test; }
printf 'machine %s login %s password %s\n' "$REGISTRY" "$REGISTRY_USER" "$REGISTRY_PASSWORD" \
  >"$CREDENTIALS"
chmod 600 "$CREDENTIALS"
IMAGE="$REGISTRY#tiny:1"
CACHE=$WORK/spool/images

# --- 2 nodes x 2 ranks in the image
out=$(timeout 120 srun -N 2 --ntasks-per-node=2 --container-image="$IMAGE" \
  sh -c 'echo "rank=$SLURM_PROCID node=$SLURMD_NODENAME ntasks=$SLURM_NTASKS image=$COHORT_IMAGE" \
    "marker=$(cat /cohort-marker)" "ns=$(readlink /proc/self/ns/mnt)" \
    "doomed=$(test -e /etc/doomed && echo yes || echo no)" "old=$(ls /opt/old)" \
    "host=$(test -e '"$ROOT"' && echo yes || echo no)"' 2>&1)
status=$?
lines=$(grep -c '^rank=' <<<"$out")
if [ "$status" -ne 0 ] || [ "$lines" -ne 4 ]; then
  fail "srun --container-image over 2x2: status $status, $lines rank lines: $out"
else
  pass "srun --container-image ran 4 ranks on 2 nodes"
  good=$(grep -c 'ntasks=4 image=tiny marker=tiny image layer 2 .* doomed=no old=new host=no$' <<<"$out")
  [ "$good" -eq 4 ] && pass "every rank sees the image's layers, whiteouts applied, and not the host" ||
    fail "ranks saw the wrong files or variables: $out"
  for r in 0 1 2 3; do grep -q "^rank=$r " <<<"$out" || fail "no rank $r: $out"; done
  # One namespace per node, shared by its two ranks.
  per_node=$(sed -n 's/.* node=\([^ ]*\) .* ns=\(mnt:\[[0-9]*\]\).*/\1 \2/p' <<<"$out" | sort -u)
  if [ "$(wc -l <<<"$per_node")" -eq 2 ] && [ "$(cut -d' ' -f2 <<<"$per_node" | sort -u | wc -l)" -eq 2 ]; then
    pass "the two ranks of each node share one mount namespace, each node its own"
  else
    fail "mount namespaces by node: $per_node"
  fi
fi
ls "$CACHE/images" 2>/dev/null | grep -q . && pass "the image is in the node's cache" ||
  fail "nothing under $CACHE/images"

# --- the NGC line: srun --mpi=pmix --container-image=... --container-mounts=...
# --container-workdir=...: the stepds' PMIx servers wire up ranks inside the
# containers (their socket's folder is mounted in). The tiny image has no
# MPI: the host's Open MPI comes in read-only, as a site's driver libraries
# would, and the program from a mounted folder.
if command -v mpicc.openmpi >/dev/null; then
  mkdir -p "$WORK/app"
  mpicc.openmpi -O1 -o "$WORK/app/allreduce" "$ROOT/tests/data/mpi/allreduce.c" ||
    fail "mpicc.openmpi could not build tests/data/mpi/allreduce.c"
  host_mpi=/usr:/usr:ro,/lib:/lib:ro,/lib64:/lib64:ro,/etc/alternatives:/etc/alternatives:ro
  host_mpi+=,/etc/openmpi:/etc/openmpi:ro
  out=$(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,tcp \
    OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo \
    timeout 120 srun -N 2 --ntasks-per-node=2 --mpi=pmix --container-image="$IMAGE" \
    --container-mounts="$host_mpi,$WORK/app:/workspace:ro" --container-workdir=/workspace \
    ./allreduce 2>&1)
  [ "$(grep -c '^rank [0-3]/4 on .* ok sum=6$' <<<"$out")" -eq 4 ] &&
    pass "srun --mpi=pmix --container-image: 4 ranks in containers wired up and all-reduced" ||
    fail "srun --mpi=pmix in containers: $out"
else
  fail "no mpicc.openmpi: run scripts/install-deps.sh (openmpi-bin, libopenmpi-dev)"
fi

# --- ContainerHooksDir: the hooks ran in order, in the container's namespace
out=$(timeout 60 srun -N 1 --container-image="$IMAGE" cat /hooked 2>&1)
grep -q "^10 pid=[0-9]*$" <<<"$out" && grep -q "^20$" <<<"$out" &&
  pass "the site's hooks ran in name order on the container's root" || fail "hooks: $out"
touch "$WORK/hook-fails"
out=$(timeout 60 srun -N 1 --container-image="$IMAGE" true 2>&1)
[ $? -ne 0 ] && grep -q "hook $WORK/hooks.d/20-second failed (exit 3): driver not found" <<<"$out" &&
  pass "a failing hook fails the step with its words" || fail "a failing hook: $out"
rm -f "$WORK/hook-fails"

# --- mounts, workdir, read-only and writable roots
mkdir -p "$WORK/data" "$WORK/results"
echo "input data" >"$WORK/data/input"
out=$(timeout 60 srun -N 1 --container-image="$IMAGE" \
  --container-mounts="$WORK/data:/data:ro,$WORK/results:/results" --container-workdir=/data \
  sh -c 'echo "pwd=$(pwd) input=$(cat input)"; touch /data/x 2>/dev/null && echo data-writable;
    echo from-container >/results/r$SLURM_PROCID; touch /made && echo root-writable' 2>&1)
grep -q "^pwd=/data input=input data$" <<<"$out" && pass "--container-workdir and a read-only mount" ||
  fail "workdir or mount: $out"
grep -q data-writable <<<"$out" && fail "a :ro mount was writable: $out"
grep -q root-writable <<<"$out" && pass "the container's root is writable by default" ||
  fail "the default root is not writable: $out"
[ "$(cat "$WORK/results/r0" 2>/dev/null)" = from-container ] &&
  pass "a writable mount's files reach the host" || fail "no $WORK/results/r0: $out"
out=$(timeout 60 srun -N 1 --container-image="$IMAGE" --container-readonly \
  sh -c 'touch /made 2>/dev/null && echo root-writable || echo root-readonly' 2>&1)
grep -q root-readonly <<<"$out" && pass "--container-readonly" || fail "--container-readonly: $out"

# --- --container-save: the step's container as its ranks left it, saved by
# the node of rank 0 as a squashfs file, runs as an image of its own.
out=$(cd "$WORK" && timeout 120 srun -N 2 --container-image="$IMAGE" --container-save=saved.sqsh \
  sh -c 'echo "saved by rank $SLURM_PROCID" >/saved-marker' 2>&1)
if [ $? -eq 0 ] && [ -s "$WORK/saved.sqsh" ]; then
  pass "--container-save made a squashfs file, relative to the working directory"
  listed=$(unsquashfs -l "$WORK/saved.sqsh")
  grep -q "^squashfs-root/cohort-marker$" <<<"$listed" &&
    ! grep -q -e "^squashfs-root/proc" -e "^squashfs-root/etc/hosts$" <<<"$listed" &&
    pass "what is mounted into the container is not saved" ||
    fail "the saved container holds mounts: $(grep -e proc -e hosts <<<"$listed" | head -3)"
  out=$(timeout 120 srun -N 1 --container-image="$WORK/saved.sqsh" \
    sh -c 'cat /saved-marker /cohort-marker; ls /proc/1 >/dev/null && echo proc-mounted' 2>&1)
  grep -q "^saved by rank 0$" <<<"$out" && grep -q "^tiny image layer 2$" <<<"$out" &&
    grep -q "^proc-mounted$" <<<"$out" &&
    pass "a saved container runs as an image: the image's files and what rank 0's node wrote" ||
    fail "running the saved container: $out"
else
  fail "--container-save: $out; $(ls -l "$WORK"/saved.sqsh 2>&1)"
fi
out=$(timeout 60 srun -N 1 --container-image="$IMAGE" --container-save=/no/such/folder/x.sqsh sh -c : 2>&1)
[ $? -ne 0 ] && grep -q -- "--container-save /no/such/folder/x.sqsh: cannot create /no/such/folder/x.sqsh: No such file or directory" <<<"$out" &&
  pass "a save that cannot be written fails the step and says why" || fail "a failed save: $out"

# --- pull-ahead: a 2-node job queued behind one that holds every node has
# its image pulled on the nodes planned for it before it starts. A new tag
# (tiny's layers and one more) so that nothing of it is cached yet.
build=$REGISTRY_DIR/build
mkdir -p "$build/ahead" && echo "pulled ahead" >"$build/ahead/ahead-marker"
make_layer "$build/ahead" "$build/ahead-layer" && echo "$LAYER_DIFF_ID" >"$build/ahead-layer.diff_id"
push_image tiny ahead amd64 '["PATH=/bin:/usr/bin"]' "$build/tiny/layer1" "$build/tiny/layer2" \
  "$build/tiny/layer3" "$build/ahead-layer" || fail "could not push tiny:ahead"
AHEAD_DIR=$CACHE/images/sha256-${IMAGE_DIGEST#sha256:}
blocker=$(submit -N 16 --exclusive --time=5 -o /dev/null --wrap 'sleep 300')
wait_until 30 state_is "$blocker" RUNNING || fail "the 16-node job did not start: $(job_state "$blocker")"
ahead=$(submit -N 2 --container-image="$REGISTRY#tiny:ahead" -o "$WORK/ahead-%j.out" \
  --wrap 'srun cat /ahead-marker')
image_ready() { cohort show job "$ahead" | grep -q "ImageAhead=image ready on its 2 planned nodes"; }
if wait_until 90 image_ready; then
  pass "show job: the image is ready on the 2 planned nodes while the job waits"
  state_is "$ahead" PENDING && [ -d "$AHEAD_DIR/rootfs" ] &&
    pass "the image is in the node's cache before its job starts" ||
    fail "not in the cache ($AHEAD_DIR) or not pending: $(job_state "$ahead")"
  cohort why "$ahead" | grep -q "^Container image: image ready on its 2 planned nodes$" &&
    pass "cohort why tells of the image" || fail "cohort why: $(cohort why "$ahead")"
else
  fail "the image was not pulled ahead: $(cohort show job "$ahead" | grep -i -e image -e reason)"
fi
cohort cancel "$blocker" >/dev/null
if wait_until 120 finished "$ahead" && state_is "$ahead" COMPLETED &&
  grep -q "^pulled ahead$" "$WORK/ahead-$ahead.out"; then
  pass "the job ran in the image pulled ahead"
else
  fail "the job after its pull ahead: $(job_state "$ahead"): $(cat "$WORK/ahead-$ahead.out" 2>&1)"
fi

# --- sbatch: the script on the host, its steps in the container; a named
# container that the second step finds as the first left it.
cat >"$WORK/named.sh" <<EOF
#!/bin/bash
#SBATCH -N 1 --container-image=$IMAGE
test -e "$ROOT" && echo "batch on the host"
srun --container-name=keep sh -c 'echo kept-by-step-0 >/kept; cat /cohort-marker'
srun --container-name=keep cat /kept
srun --container-name=other:exec sh -c : || echo "no container other"
# A step that names a container another step runs in joins it (pyxis's
# exec): the same mount namespace. Tried until the first step's is up.
srun --container-name=keep sh -c 'readlink /proc/self/ns/mnt >/ns-a; sleep 8' &
for i in \$(seq 60); do
  out=\$(srun --overlap --container-name=keep:exec sh -c \
    'test -s /ns-a && [ "\$(cat /ns-a)" = "\$(readlink /proc/self/ns/mnt)" ] && echo joined' 2>/dev/null)
  case "\$out" in *joined*) echo "joined the running container"; break ;; esac
  sleep 0.25
done
srun --overlap --container-name=keep:no_exec sh -c : 2>&1 | grep -q "is in use by another step" &&
  echo "no_exec refused while it runs"
wait
srun --container-name=keep:no_create cat /kept
srun --container-name=nope:no_create sh -c : || echo "no container nope"
EOF
id=$(submit -o "$WORK/named-%j.out" "$WORK/named.sh")
if [ -z "$id" ] || ! wait_until 120 finished "$id"; then
  fail "the named-container batch job did not end: $(cohort show job "$id" 2>&1 | head -5)"
else
  out=$(cat "$WORK/named-$id.out")
  grep -q "^batch on the host$" <<<"$out" && pass "sbatch --container-image: the script runs on the host" ||
    fail "the batch script did not run on the host: $out"
  grep -q "^tiny image layer 2$" <<<"$out" && pass "sbatch --container-image: srun runs in the image" ||
    fail "the step did not run in the image: $out"
  scontrol show job "$id" | grep -qF "ContainerImage=$IMAGE " &&
    pass "scontrol show job shows the job's image" ||
    fail "scontrol show job: $(scontrol show job "$id" | grep -i container)"
  grep -q "^kept-by-step-0$" <<<"$out" && pass "a named container keeps its files for the next step" ||
    fail "step 1 did not find step 0's file in container keep: $out"
  grep -q 'no step of this job runs in container "other"' <<<"$out" &&
    grep -q "^no container other$" <<<"$out" &&
    pass "--container-name=NAME:exec of no running container says so" ||
    fail "exec of a missing container: $out"
  grep -q "^joined the running container$" <<<"$out" &&
    pass "a step joins the named container another step runs in (:exec)" ||
    fail "no step joined the running container: $out"
  grep -q "^no_exec refused while it runs$" <<<"$out" &&
    pass ":no_exec is refused while another step runs in the container" || fail ":no_exec: $out"
  [ "$(grep -c "^kept-by-step-0$" <<<"$out")" -eq 2 ] && grep -q "^no container nope$" <<<"$out" &&
    grep -q 'no container "nope"' <<<"$out" &&
    pass ":no_create uses the container's files, and fails when there is none" ||
    fail ":no_create: $out"
fi
[ -z "$(ls "$WORK/spool/containers" 2>/dev/null)" ] &&
  pass "the job's named containers are gone once it left the node" ||
  fail "left behind: $(ls -R "$WORK/spool/containers" | head)"

# --- failures: the registry's and the system's words, a clean cache
before=$(ls "$CACHE/images" | wc -l)
out=$(timeout 60 srun -N 1 --container-image="$REGISTRY#tiny:nope" true 2>&1)
[ $? -ne 0 ] && grep -qi "manifest" <<<"$out" && pass "a missing tag fails with the registry's words" ||
  fail "a missing tag: $out"
out=$(timeout 60 srun -N 1 --container-image="$IMAGE" --container-mounts=/no/such/folder:/x true 2>&1)
[ $? -ne 0 ] && grep -q "/no/such/folder does not exist" <<<"$out" &&
  pass "a missing mount source fails the step and says which" || fail "a missing mount source: $out"
printf 'machine %s login %s password wrong\n' "$REGISTRY" "$REGISTRY_USER" >"$CREDENTIALS"
push_random_image tiny fresh 1 >/dev/null || fail "could not push a second image"
out=$(timeout 60 srun -N 1 --container-image="$REGISTRY#tiny:fresh" true 2>&1)
[ $? -ne 0 ] && grep -qi "refused\|401\|unauthorized" <<<"$out" &&
  pass "a wrong password fails with the registry's refusal" || fail "a wrong password: $out"
[ "$(ls "$CACHE/images" | wc -l)" -eq "$before" ] && [ -z "$(ls "$CACHE/tmp" 2>/dev/null)" ] &&
  pass "failed pulls leave the cache as it was" ||
  fail "the cache changed: $(ls "$CACHE/images" "$CACHE/tmp" 2>&1)"
# The agent's metrics: images pulled, found in the cache, failed.
metrics=$(curl -sf "http://127.0.0.1:$(cat "$WORK/agent-http-port")/metrics")
total() {
  sed -n "s/^cohort_agent_container_images_total{node=\"[a-z0-9]*\",outcome=\"$1\"} //p" <<<"$metrics" |
    awk '{ sum += $1 } END { print sum + 0 }'
}
# The first step's two nodes pulled at once: one fetched, the other waited
# for it and found it cached.
ahead_pulled=$(sed -n 's/^cohort_agent_container_images_ahead_total{node="[a-z0-9]*",outcome="pulled"} //p' \
  <<<"$metrics" | awk '{ sum += $1 } END { print sum + 0 }')
[ "$ahead_pulled" -ge 1 ] && pass "the agent counts images pulled ahead" ||
  fail "images pulled ahead: $(grep images_ahead <<<"$metrics")"
[ "$(total pulled)" -ge 1 ] && [ "$(total cached)" -ge 4 ] && [ "$(total failed)" -ge 2 ] &&
  grep -q '^cohort_agent_container_pulled_bytes_total{node="[a-z0-9]*"} [1-9]' <<<"$metrics" &&
  pass "the agent counts images pulled, cached and failed, and the bytes pulled" ||
  fail "container metrics: pulled $(total pulled) cached $(total cached) failed $(total failed):
$(grep container <<<"$metrics" | grep -v bucket | head -12)"
kill -0 "$AGENT_PID" && wait_until 30 all_nodes_up && pass "the agent keeps running" ||
  fail "the agent is gone or nodes are down: $(node_states)"

finish_test
