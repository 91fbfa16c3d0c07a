#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# cohort-image against a real registry (Distribution, TLS from a test CA,
# htpasswd logins): a pull lands the image's layers with their whiteouts
# applied and is found cached the second time; an index gives this
# machine's platform; a wrong password, a missing tag and a registry that
# dies mid-download fail with the registry's or the system's words and leave
# nothing in the cache; two pulls at once share one download.
source "$(dirname "$0")/lib.sh"
source "$ROOT/tests/integration/registry_lib.sh"

IMAGE=$BIN/daemons/agent/cohort-image
[ -x "$IMAGE" ] || { fail "no $IMAGE; build the cohort-image target"; exit 1; }
for tool in /usr/bin/docker-registry htpasswd /bin/busybox; do
  command -v "$tool" >/dev/null || { echo "skip: $tool is missing"; exit 77; }
done

start_registry "$WORK/registry" || { fail "the registry did not start"; exit 1; }
push_tiny_image tiny 1 || { fail "could not push the tiny image"; exit 1; }
pass "registry at $REGISTRY with the tiny image"

echo "# a login for the test registry
machine 127.0.0.1 login $REGISTRY_USER
  password $REGISTRY_PASSWORD" >"$WORK/credentials"
chmod 600 "$WORK/credentials"
echo "machine 127.0.0.1 login $REGISTRY_USER password wrong-$REGISTRY_PASSWORD" >"$WORK/wrong-credentials"

# pull CACHE REFERENCE [ARGS...]: runs cohort-image, its JSON in
# $WORK/out.json, its stderr in $WORK/err, its status in $RC.
pull() {
  local cache=$1 reference=$2
  shift 2
  "$IMAGE" pull --cache "$cache" --ca-file "$REGISTRY_CA" "$@" "$reference" \
    >"$WORK/out.json" 2>"$WORK/err"
  RC=$?
}
field() { python3 -c 'import json,sys; v=json.load(open(sys.argv[1]))[sys.argv[2]]; print(json.dumps(v) if isinstance(v,(list,bool)) else v)' "$WORK/out.json" "$1"; }
empty_cache() { [ -z "$(find "$1/images" "$1/tmp" -mindepth 1 2>/dev/null)" ]; }

# --- first pull: the layers, in order, with their whiteouts
pull "$WORK/cache" "$REGISTRY#tiny:1" --credentials "$WORK/credentials"
if [ "$RC" = 0 ] && [ "$(field cached)" = false ]; then
  pass "first pull downloads (cached=false)"
else
  fail "first pull: status $RC, $(cat "$WORK/out.json" "$WORK/err")"
fi
ROOTFS=$(field rootfs 2>/dev/null)
[ "$(field digest 2>/dev/null)" = "$TINY_DIGEST" ] && pass "digest is the manifest's" ||
  fail "digest $(field digest) is not $TINY_DIGEST"
[ "$(cat "$ROOTFS/cohort-marker" 2>/dev/null)" = "tiny image layer 2" ] &&
  pass "layer 2's /cohort-marker is there" || fail "no /cohort-marker in $ROOTFS"
[ -x "$ROOTFS/bin/busybox" ] && [ "$(readlink "$ROOTFS/bin/sh")" = busybox ] &&
  pass "/bin/busybox and its links are there" || fail "no /bin/busybox or /bin/sh link"
[ ! -e "$ROOTFS/etc/doomed" ] && [ -d "$ROOTFS/etc" ] &&
  pass "the whiteout removed /etc/doomed" || fail "/etc/doomed survived its whiteout"
[ "$(ls -A "$ROOTFS/opt/old" 2>/dev/null)" = new ] &&
  pass "the opaque whiteout left only /opt/old/new" ||
  fail "/opt/old holds: $(ls -A "$ROOTFS/opt/old" 2>&1)"
[ ! -e "$ROOTFS/etc/.wh.doomed" ] && [ ! -e "$ROOTFS/opt/old/.wh..wh..opq" ] &&
  pass "whiteout files are not extracted" || fail "whiteout files were extracted"
grep -q '"COHORT_IMAGE=tiny"' "$WORK/out.json" && [ "$(field working_dir)" = / ] &&
  pass "env and working_dir come from the config" || fail "config fields: $(cat "$WORK/out.json")"
[ "$(chroot "$ROOTFS" /bin/cat /cohort-marker 2>/dev/null)" = "tiny image layer 2" ] &&
  pass "the rootfs runs its busybox" || fail "chroot $ROOTFS /bin/cat failed"

# --- second pull: cached
pull "$WORK/cache" "$REGISTRY#tiny:1" --credentials "$WORK/credentials"
[ "$RC" = 0 ] && [ "$(field cached)" = true ] && [ "$(field rootfs)" = "$ROOTFS" ] &&
  pass "second pull is cached" || fail "second pull: status $RC, $(cat "$WORK/out.json" "$WORK/err")"
# By digest: found without the network (the registry is not asked).
before=$(grep -c '"GET /v2/' "$WORK/registry/registry.log")
pull "$WORK/cache" "$REGISTRY#tiny@$TINY_DIGEST"
after=$(grep -c '"GET /v2/' "$WORK/registry/registry.log")
[ "$RC" = 0 ] && [ "$(field cached)" = true ] && [ "$before" = "$after" ] &&
  pass "a digest reference hits the cache without the registry" ||
  fail "digest pull: status $RC, $before -> $after requests, $(cat "$WORK/err")"

# --- the index's amd64 entry (explicit platform), and its arm64 one
pull "$WORK/cache" "$REGISTRY#tiny:1-multi" --credentials "$WORK/credentials" --platform linux/amd64
[ "$RC" = 0 ] && [ "$(field digest)" = "$TINY_DIGEST" ] &&
  pass "the index gives the linux/amd64 manifest" ||
  fail "index pull: status $RC, $(cat "$WORK/out.json" "$WORK/err")"
pull "$WORK/cache" "$REGISTRY#tiny:1-multi" --credentials "$WORK/credentials" --platform linux/arm64
[ "$RC" = 0 ] && [ "$(field digest)" = "$TINY_ARM64_DIGEST" ] &&
  grep -q COHORT_IMAGE=tiny-arm64 "$WORK/out.json" &&
  pass "--platform linux/arm64 gives the arm64 manifest" ||
  fail "arm64 pull: status $RC, $(cat "$WORK/out.json" "$WORK/err")"
pull "$WORK/cache" "$REGISTRY#tiny:1-multi" --credentials "$WORK/credentials" --platform linux/s390x
[ "$RC" = 1 ] && grep -q "no manifest for linux/s390x" "$WORK/err" &&
  pass "a platform the index lacks: $(cat "$WORK/err")" || fail "s390x: status $RC, $(cat "$WORK/err")"

# --- refusals leave nothing behind
pull "$WORK/cache-wrong" "$REGISTRY#tiny:1" --credentials "$WORK/wrong-credentials"
if [ "$RC" = 1 ] && grep -q "refused the login for user \"$REGISTRY_USER\" (401 UNAUTHORIZED" "$WORK/err" &&
  ! grep -q "$REGISTRY_PASSWORD" "$WORK/err" && empty_cache "$WORK/cache-wrong"; then
  pass "a wrong password: $(cat "$WORK/err")"
else
  fail "wrong password: status $RC, $(cat "$WORK/err"); cache: $(ls -AR "$WORK/cache-wrong" | head)"
fi
pull "$WORK/cache-anon" "$REGISTRY#tiny:1"
[ "$RC" = 1 ] && grep -q "asks for a login" "$WORK/err" && empty_cache "$WORK/cache-anon" &&
  pass "no credentials: $(cat "$WORK/err")" || fail "no credentials: status $RC, $(cat "$WORK/err")"
pull "$WORK/cache" "$REGISTRY#tiny:nope" --credentials "$WORK/credentials"
[ "$RC" = 1 ] && grep -q "404 MANIFEST_UNKNOWN" "$WORK/err" && grep -q "check the tag" "$WORK/err" &&
  pass "a missing tag: $(cat "$WORK/err")" || fail "missing tag: status $RC, $(cat "$WORK/err")"
# A mirror that does not answer (a port nothing listens on): the registry
# itself serves the pull.
dead_port=$(free_port)
pull "$WORK/cache-mirror" "$REGISTRY#tiny:1" --credentials "$WORK/credentials" \
  --mirror "$REGISTRY=http://127.0.0.1:$dead_port"
[ "$RC" = 0 ] && [ -e "$(field rootfs)/cohort-marker" ] &&
  pass "a dead mirror falls back to the registry" ||
  fail "a dead mirror: status $RC, $(cat "$WORK/err")"
pull "$WORK/cache" "$REGISTRY#Tiny:1"
[ "$RC" = 2 ] && grep -q 'must be lowercase' "$WORK/err" &&
  pass "a malformed reference is a usage error: $(cat "$WORK/err")" ||
  fail "malformed reference: status $RC, $(cat "$WORK/err")"
pull "$WORK/cache" "$REGISTRY#tiny:1" --credentials "$WORK/credentials" --credentials-uid 65534
[ "$RC" = 1 ] && grep -q "Permission denied" "$WORK/err" &&
  pass "the credentials file is read as --credentials-uid: $(cat "$WORK/err")" ||
  fail "--credentials-uid 65534 read root's 0600 file: status $RC, $(cat "$WORK/err")"
# An owner without enroot credentials of their own: the node's are used.
pull "$WORK/cache" "$REGISTRY#tiny:1" --credentials "$WORK/credentials" --owner 65534
[ "$RC" = 0 ] && pass "--owner without credentials of their own uses the node's" ||
  fail "--owner 65534 with the node's credentials: status $RC, $(cat "$WORK/err")"

# --- two pulls at once into a fresh cache: one download
blob_gets() { grep -c "\"GET /v2/tiny/blobs/$TINY_LAYER2 " "$WORK/registry/registry.log"; }
before=$(blob_gets)
"$IMAGE" pull --cache "$WORK/cache-shared" --ca-file "$REGISTRY_CA" --credentials "$WORK/credentials" \
  "$REGISTRY#tiny:1" >"$WORK/a.json" 2>"$WORK/a.err" &
first=$!
"$IMAGE" pull --cache "$WORK/cache-shared" --ca-file "$REGISTRY_CA" --credentials "$WORK/credentials" \
  "$REGISTRY#tiny:1" >"$WORK/b.json" 2>"$WORK/b.err" &
second=$!
wait "$first"; rc_a=$?
wait "$second"; rc_b=$?
rootfs_of() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["rootfs"])' "$1"; }
if [ "$rc_a" = 0 ] && [ "$rc_b" = 0 ] && [ "$(rootfs_of "$WORK/a.json")" = "$(rootfs_of "$WORK/b.json")" ] &&
  [ "$(ls "$WORK/cache-shared/images" | wc -l)" = 1 ] && [ "$(($(blob_gets) - before))" = 1 ] &&
  grep -q '"cached": *true' "$WORK/a.json" "$WORK/b.json"; then
  pass "two pulls at once share one download"
else
  fail "concurrent pulls: $rc_a/$rc_b, $(cat "$WORK/a.json" "$WORK/a.err" "$WORK/b.json" "$WORK/b.err"), $(($(blob_gets) - before)) downloads"
fi

# --- eviction keeps an image in use
pull "$WORK/cache" "$REGISTRY#tiny:1-multi" --credentials "$WORK/credentials" --platform linux/arm64
ARM_DIR=$(dirname "$(field rootfs)")
exec {held}<"$ARM_DIR/in-use.lock" && flock -s "$held"
pull "$WORK/cache" "$REGISTRY#tiny:1" --credentials "$WORK/credentials" --max-cache-bytes 3000000
[ "$RC" = 0 ] && [ -d "$ARM_DIR/rootfs" ] && [ -d "$ROOTFS" ] &&
  pass "eviction skips an image in use and the one just pulled" ||
  fail "eviction: status $RC, $(cat "$WORK/err"), $(ls "$WORK/cache/images")"
exec {held}<&-
pull "$WORK/cache" "$REGISTRY#tiny:1" --credentials "$WORK/credentials" --max-cache-bytes 3000000
[ "$RC" = 0 ] && [ ! -e "$ARM_DIR" ] && [ -d "$ROOTFS" ] && [ -z "$(ls -A "$WORK/cache/tmp")" ] &&
  pass "eviction removes an image no longer in use" ||
  fail "eviction after release: status $RC, $(ls "$WORK/cache/images" "$WORK/cache/tmp")"

# --- local sources: a squashfs file, an OCI layout folder and its tar
if command -v mksquashfs >/dev/null && command -v unsquashfs >/dev/null; then
  mkdir -p "$WORK/sqsh-src/bin" && cp /bin/busybox "$WORK/sqsh-src/bin/" &&
    echo "from squashfs" >"$WORK/sqsh-src/marker" &&
    mksquashfs "$WORK/sqsh-src" "$WORK/local.sqsh" -quiet -noappend >/dev/null 2>&1
  pull "$WORK/cache-local" "$WORK/local.sqsh"
  [ "$RC" = 0 ] && [ "$(cat "$(field rootfs)/marker" 2>/dev/null)" = "from squashfs" ] &&
    [ "$(field digest)" = "$(sha256_of "$WORK/local.sqsh")" ] &&
    pass "a squashfs file is unpacked, keyed by its digest" ||
    fail "squashfs: status $RC, $(cat "$WORK/out.json" "$WORK/err")"
  pull "$WORK/cache-local" "$WORK/local.sqsh"
  [ "$RC" = 0 ] && [ "$(field cached)" = true ] && pass "a squashfs file is cached" ||
    fail "squashfs again: status $RC, $(cat "$WORK/err")"
  # A file the job's owner names is opened as them: root's 0600 file is not
  # theirs to read.
  chmod 600 "$WORK/local.sqsh"
  pull "$WORK/cache-owner" "$WORK/local.sqsh" --owner 65534
  [ "$RC" = 1 ] && grep -q "cannot open the image $WORK/local.sqsh: Permission denied" "$WORK/err" &&
    empty_cache "$WORK/cache-owner" &&
    pass "a squashfs file is opened as --owner: $(cat "$WORK/err")" ||
    fail "--owner 65534 read root's 0600 squashfs file: status $RC, $(cat "$WORK/err")"
  pull "$WORK/cache-owner" "$WORK/local.sqsh" --owner 0
  [ "$RC" = 0 ] && [ "$(cat "$(field rootfs)/marker" 2>/dev/null)" = "from squashfs" ] &&
    pass "its owner's squashfs file is unpacked" ||
    fail "--owner 0: status $RC, $(cat "$WORK/err")"
fi
LAYOUT=$WORK/layout
mkdir -p "$LAYOUT/blobs/sha256"
echo '{"imageLayoutVersion":"1.0.0"}' >"$LAYOUT/oci-layout"
for blob in "$REGISTRY_DIR"/build/tiny/layer?.tar.gz "$REGISTRY_DIR"/build/config-1-amd64.json \
  "$REGISTRY_DIR"/build/manifest-1-amd64.json; do
  cp "$blob" "$LAYOUT/blobs/sha256/$(sha256_of "$blob" | cut -d: -f2)"
done
printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"%s","size":%s}]}' \
  "$TINY_DIGEST" "$(size_of "$REGISTRY_DIR/build/manifest-1-amd64.json")" >"$LAYOUT/index.json"
pull "$WORK/cache-local" "$LAYOUT"
[ "$RC" = 0 ] && [ "$(field digest)" = "$TINY_DIGEST" ] && [ ! -e "$(field rootfs)/etc/doomed" ] &&
  [ -e "$(field rootfs)/cohort-marker" ] && pass "an OCI layout folder gives the same image" ||
  fail "OCI layout: status $RC, $(cat "$WORK/out.json" "$WORK/err")"
tar -C "$LAYOUT" -cf "$WORK/layout.tar" .
pull "$WORK/cache-layout-tar" "oci-archive:$WORK/layout.tar"
[ "$RC" = 0 ] && [ "$(field digest)" = "$TINY_DIGEST" ] && [ -z "$(ls -A "$WORK/cache-layout-tar/tmp")" ] &&
  pass "an OCI layout tar gives the same image, and its unpacked copy is gone" ||
  fail "OCI archive: status $RC, $(cat "$WORK/out.json" "$WORK/err")"
# Same size, one byte changed: only the digest tells.
printf X | dd of="$LAYOUT/blobs/sha256/$(echo "$TINY_LAYER2" | cut -d: -f2)" bs=1 seek=20 \
  conv=notrunc 2>/dev/null
pull "$WORK/cache-corrupt" "oci:$LAYOUT"
[ "$RC" = 1 ] && grep -q "layer $TINY_LAYER2 does not match its digest (got sha256:" "$WORK/err" && empty_cache "$WORK/cache-corrupt" &&
  pass "a corrupt layer is refused: $(cat "$WORK/err")" ||
  fail "corrupt layer: status $RC, $(cat "$WORK/err")"

# --- the registry dies mid-download
push_random_image big 1 20 || { fail "could not push the big image"; exit 1; }
"$IMAGE" pull --cache "$WORK/cache-big" --ca-file "$REGISTRY_CA" --credentials "$WORK/credentials" \
  --limit-rate 2000000 "$REGISTRY#big:1" >"$WORK/big.json" 2>"$WORK/big.err" &
puller=$!
downloading() { [ -n "$(find "$WORK/cache-big/tmp" -name 'layer-*' -size +100k 2>/dev/null)" ]; }
wait_until 30 downloading || fail "the big layer's download did not start"
{ kill -9 "$REGISTRY_PID"; wait "$REGISTRY_PID"; } 2>/dev/null
wait "$puller"; rc=$?
if [ "$rc" = 1 ] && grep -q "failed" "$WORK/big.err" && empty_cache "$WORK/cache-big"; then
  pass "a registry killed mid-download: $(cat "$WORK/big.err")"
else
  fail "registry killed: status $rc, $(cat "$WORK/big.err"); cache: $(ls -AR "$WORK/cache-big" | head)"
fi
stop_registry

finish_test
