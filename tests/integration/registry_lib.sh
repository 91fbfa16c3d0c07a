#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Sourced by integration tests after lib.sh: a private OCI registry (Debian's
# Distribution registry, docker-registry) on 127.0.0.1 with TLS from a test
# CA and htpasswd logins, and images built and pushed with curl alone (the
# OCI distribution API), small enough to push in well under a second.
#
#   start_registry DIR          starts it; exports REGISTRY (127.0.0.1:PORT),
#                               REGISTRY_PID, REGISTRY_CA, REGISTRY_USER,
#                               REGISTRY_PASSWORD; its log is DIR/registry.log
#   stop_registry               stops it (by PID)
#   push_tiny_image NAME TAG    a busybox image in three layers (whiteouts in
#                               the third) under TAG, and under TAG-multi an
#                               index of it and an arm64 variant; exports
#                               TINY_DIGEST, TINY_ARM64_DIGEST, TINY_LAYER2
#   push_random_image NAME TAG MB   one layer of MB MiB of random bytes

REGISTRY_DIR=""

# registry_curl ARGS...: curl on the registry, as its user, trusting its CA.
registry_curl() {
  curl -sS --cacert "$REGISTRY_CA" -u "$REGISTRY_USER:$REGISTRY_PASSWORD" "$@"
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

registry_answers_401() {
  [ "$(curl -s -o /dev/null -w '%{http_code}' --cacert "$REGISTRY_CA" "https://$REGISTRY/v2/")" = 401 ]
}

start_registry() {
  REGISTRY_DIR=$1
  mkdir -p "$REGISTRY_DIR/storage" || return 1
  # The cluster's test CA when lib.sh's make_tls made one, else one here.
  local tls=$REGISTRY_DIR/tls
  if [ -f "$WORK/tls/ca.key" ]; then
    tls=$WORK/tls
  else
    make_ca "$tls" "cohort test registry CA" || { cat "$tls/openssl.log" >&2; return 1; }
  fi
  sign_certificate "$tls" registry "IP:127.0.0.1,DNS:localhost" ||
    { cat "$tls/openssl.log" >&2; return 1; }
  REGISTRY_CA=$tls/ca.pem
  REGISTRY_USER=cohort
  REGISTRY_PASSWORD=$(head -c 12 /dev/urandom | base64 | tr -d '/+=')
  htpasswd -Bbn "$REGISTRY_USER" "$REGISTRY_PASSWORD" >"$REGISTRY_DIR/htpasswd" 2>/dev/null ||
    return 1
  local attempt port
  for attempt in 1 2 3 4 5; do
    port=$(free_port) || return 1
    cat >"$REGISTRY_DIR/config.yml" <<CONF
version: 0.1
log:
  level: info
  accesslog:
    disabled: false
storage:
  filesystem:
    rootdirectory: $REGISTRY_DIR/storage
  delete:
    enabled: true
http:
  addr: 127.0.0.1:$port
  secret: cohort-test-$RANDOM$RANDOM
  tls:
    certificate: $tls/registry.pem
    key: $tls/registry.key
auth:
  htpasswd:
    realm: cohort-test-registry
    path: $REGISTRY_DIR/htpasswd
CONF
    REGISTRY=127.0.0.1:$port
    /usr/bin/docker-registry serve "$REGISTRY_DIR/config.yml" >>"$REGISTRY_DIR/registry.log" 2>&1 &
    REGISTRY_PID=$!
    PIDS+=("$REGISTRY_PID")
    registry_up() { registry_answers_401 || ! kill -0 "$REGISTRY_PID"; }
    wait_until 20 registry_up
    if registry_answers_401; then
      export REGISTRY REGISTRY_PID REGISTRY_CA REGISTRY_USER REGISTRY_PASSWORD
      return 0
    fi
    stop_registry
    # Another process took the port between the probe and the bind: retry.
    grep -q "address already in use" "$REGISTRY_DIR/registry.log" || break
  done
  echo "the registry did not start; its log:" >&2
  tail -20 "$REGISTRY_DIR/registry.log" >&2
  return 1
}

stop_registry() {
  [ -n "${REGISTRY_PID:-}" ] || return 0
  kill "$REGISTRY_PID" 2>/dev/null
  local _
  for _ in $(seq 50); do kill -0 "$REGISTRY_PID" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$REGISTRY_PID" 2>/dev/null
  wait "$REGISTRY_PID" 2>/dev/null
  local kept=() pid
  for pid in "${PIDS[@]}"; do [ "$pid" != "$REGISTRY_PID" ] && kept+=("$pid"); done
  PIDS=("${kept[@]}")
  REGISTRY_PID=""
}

sha256_of() { echo "sha256:$(sha256sum "$1" | cut -d' ' -f1)"; }
size_of() { stat -c %s "$1"; }

# push_blob NAME FILE: uploads FILE (POST, then PUT with its digest).
push_blob() {
  local name=$1 file=$2 digest location
  digest=$(sha256_of "$file")
  location=$(registry_curl -X POST -D - -o /dev/null "https://$REGISTRY/v2/$name/blobs/uploads/" |
    tr -d '\r' | sed -n 's/^[Ll]ocation: *//p')
  [ -n "$location" ] || { echo "push_blob: no upload location for $name" >&2; return 1; }
  case "$location" in /*) location="https://$REGISTRY$location" ;; esac
  case "$location" in *\?*) location="$location&digest=$digest" ;; *) location="$location?digest=$digest" ;; esac
  local code
  code=$(registry_curl -X PUT -o /dev/null -w '%{http_code}' \
    -H 'Content-Type: application/octet-stream' --data-binary "@$file" "$location")
  [ "$code" = 201 ] || { echo "push_blob: PUT $file answered $code" >&2; return 1; }
}

# push_manifest NAME TAG FILE MEDIA_TYPE
push_manifest() {
  local code
  code=$(registry_curl -X PUT -o "$REGISTRY_DIR/put.out" -w '%{http_code}' \
    -H "Content-Type: $4" --data-binary "@$3" "https://$REGISTRY/v2/$1/manifests/$2")
  [ "$code" = 201 ] || { echo "push_manifest: $1:$2 answered $code: $(cat "$REGISTRY_DIR/put.out")" >&2; return 1; }
}

# make_layer DIR OUT: OUT.tar.gz of DIR's content owned by root; sets
# LAYER_DIGEST, LAYER_SIZE (compressed) and LAYER_DIFF_ID.
make_layer() {
  tar -C "$1" --numeric-owner --owner=0 --group=0 --sort=name -cf "$2.tar" . || return 1
  LAYER_DIFF_ID=$(sha256_of "$2.tar")
  gzip -n -f "$2.tar" || return 1
  LAYER_DIGEST=$(sha256_of "$2.tar.gz")
  LAYER_SIZE=$(size_of "$2.tar.gz")
}

# push_image NAME TAG ARCH ENV_JSON LAYER_OUT...: pushes the layers
# (make_layer's OUT names), a config and an OCI manifest; sets
# IMAGE_DIGEST and IMAGE_SIZE (the manifest's).
push_image() {
  local name=$1 tag=$2 arch=$3 env=$4
  shift 4
  local layers="" diff_ids="" out
  for out in "$@"; do
    LAYER_DIGEST=$(sha256_of "$out.tar.gz")
    push_blob "$name" "$out.tar.gz" || return 1
    layers+="${layers:+,}{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+gzip\",\"digest\":\"$LAYER_DIGEST\",\"size\":$(size_of "$out.tar.gz")}"
    diff_ids+="${diff_ids:+,}\"$(cat "$out.diff_id")\""
  done
  local build=$REGISTRY_DIR/build
  printf '{"architecture":"%s","os":"linux","config":{"Env":%s,"WorkingDir":"/"},"rootfs":{"type":"layers","diff_ids":[%s]}}' \
    "$arch" "$env" "$diff_ids" >"$build/config-$tag-$arch.json"
  push_blob "$name" "$build/config-$tag-$arch.json" || return 1
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"%s","size":%s},"layers":[%s]}' \
    "$(sha256_of "$build/config-$tag-$arch.json")" "$(size_of "$build/config-$tag-$arch.json")" \
    "$layers" >"$build/manifest-$tag-$arch.json"
  push_manifest "$name" "$tag" "$build/manifest-$tag-$arch.json" \
    application/vnd.oci.image.manifest.v1+json || return 1
  IMAGE_DIGEST=$(sha256_of "$build/manifest-$tag-$arch.json")
  IMAGE_SIZE=$(size_of "$build/manifest-$tag-$arch.json")
}

push_tiny_image() {
  local name=$1 tag=$2 build=$REGISTRY_DIR/build
  rm -rf "$build/tiny" && mkdir -p "$build/tiny/1/bin" "$build/tiny/1/etc" "$build/tiny/1/opt/old" \
    "$build/tiny/2" "$build/tiny/3/etc" "$build/tiny/3/opt/old" || return 1
  cp /bin/busybox "$build/tiny/1/bin/busybox" || return 1
  local tool
  for tool in sh cat ls echo id pwd env test readlink stat sleep touch mkdir; do
    ln -s busybox "$build/tiny/1/bin/$tool"
  done
  echo "removed by layer 3" >"$build/tiny/1/etc/doomed"
  echo "hidden by layer 3" >"$build/tiny/1/opt/old/file"
  echo "tiny image layer 2" >"$build/tiny/2/cohort-marker"
  : >"$build/tiny/3/etc/.wh.doomed"
  : >"$build/tiny/3/opt/old/.wh..wh..opq"
  echo "new in layer 3" >"$build/tiny/3/opt/old/new"
  local n
  for n in 1 2 3; do
    make_layer "$build/tiny/$n" "$build/tiny/layer$n" || return 1
    echo "$LAYER_DIFF_ID" >"$build/tiny/layer$n.diff_id"
    [ "$n" = 2 ] && TINY_LAYER2=$LAYER_DIGEST
  done
  local layers=("$build/tiny/layer1" "$build/tiny/layer2" "$build/tiny/layer3")
  push_image "$name" "$tag" amd64 '["PATH=/bin:/usr/bin","COHORT_IMAGE=tiny"]' "${layers[@]}" ||
    return 1
  TINY_DIGEST=$IMAGE_DIGEST
  local amd64_size=$IMAGE_SIZE
  # The arm64 variant differs only in its config, so that the index's two
  # entries are told apart by digest.
  push_image "$name" "$tag-arm64" arm64 '["PATH=/bin:/usr/bin","COHORT_IMAGE=tiny-arm64"]' \
    "${layers[@]}" || return 1
  TINY_ARM64_DIGEST=$IMAGE_DIGEST
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"%s","size":%s,"platform":{"architecture":"arm64","os":"linux","variant":"v8"}},{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"%s","size":%s,"platform":{"architecture":"amd64","os":"linux"}}]}' \
    "$TINY_ARM64_DIGEST" "$IMAGE_SIZE" "$TINY_DIGEST" "$amd64_size" >"$build/index-$tag.json"
  push_manifest "$name" "$tag-multi" "$build/index-$tag.json" \
    application/vnd.oci.image.index.v1+json || return 1
  export TINY_DIGEST TINY_ARM64_DIGEST TINY_LAYER2
}

push_random_image() {
  local name=$1 tag=$2 mb=$3
  local build=$REGISTRY_DIR/build/random-$tag
  rm -rf "$build" && mkdir -p "$build/content" || return 1
  head -c "$((mb * 1024 * 1024))" /dev/urandom >"$build/content/random.bin" || return 1
  make_layer "$build/content" "$build/layer" || return 1
  echo "$LAYER_DIFF_ID" >"$build/layer.diff_id"
  push_image "$name" "$tag" amd64 '["PATH=/bin"]' "$build/layer"
}
