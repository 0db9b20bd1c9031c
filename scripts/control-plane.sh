#!/usr/bin/env bash
# A real Kubernetes control plane on loopback, built from upstream sources:
#
#   scripts/control-plane.sh build          build (or find cached) etcd, kube-apiserver,
#                                           kube-controller-manager, kube-scheduler and kwok
#   scripts/control-plane.sh run DIR -- CMD start them in DIR, run CMD with KUBECONFIG (admin),
#                                           FLEETWRIGHT_KUBECONFIG (Fleetwright's identity) and
#                                           FLEETWRIGHT_CONTROL_PLANE_DIR (the CA, and a loopback
#                                           webhook's serving certificate) set, then stop
#                                           everything by PID
#   scripts/control-plane.sh start DIR      start them and leave them running (DIR/pids)
#   scripts/control-plane.sh stop DIR       stop what `start` started
#
# FLEETWRIGHT_CONTROL_PLANE_PARTS=api starts etcd and kube-apiserver alone (the scale benchmark,
# whose nodes have no kubelets for the controllers to act on).
#
# The binaries come from the Go module proxy at the versions tests/control-plane/go.mod pins
# (k8s.io/kubernetes with its staging modules replaced, etcd, kwok) and are cached outside the
# clone, keyed by go.mod, go.sum and the Go version, so a second run on the machine starts in
# seconds. The API server serves TLS with a generated CA, authenticates by static tokens (an
# admin in system:masters, and `fleetwright` in the group the manifests' RBAC binds), and
# authorizes with RBAC. Every write Fleetwright's identity makes is in the audit log
# (DIR/audit.log, one JSON event a line), so a test can prove what it wrote. A third identity,
# `autoscaler` (DIR/autoscaler.kubeconfig, in system:masters), is what scripts/peer-e2e.sh runs
# either autoscaler as; every request it makes is in the audit log, to be counted. kwok plays the
# kubelets: it keeps the nodes annotated
# `kwok.x-k8s.io/node: fake` Ready and runs the pods bound to them.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
module="$repo/tests/control-plane"

cache_dir() {
    local key
    key=$(cat "$module/go.mod" "$module/go.sum" <(go env GOVERSION) | sha256sum | cut -c1-16)
    echo "${FLEETWRIGHT_CONTROL_PLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/fleetwright/control-plane}/$key"
}

build() {
    local dir
    dir=$(cache_dir)
    if [ -x "$dir/bin/kube-apiserver" ] && [ -x "$dir/bin/kwok" ] && [ -f "$dir/bin/kwok-stages.yaml" ]; then
        echo "$dir/bin"
        return
    fi
    mkdir -p "$dir/bin.tmp"
    (
        cd "$module"
        # One build command, so the packages the binaries share are compiled once.
        CGO_ENABLED=0 go build -trimpath -ldflags=-s -o "$dir/bin.tmp/" \
            go.etcd.io/etcd/server/v3 \
            k8s.io/kubernetes/cmd/kube-apiserver \
            k8s.io/kubernetes/cmd/kube-controller-manager \
            k8s.io/kubernetes/cmd/kube-scheduler \
            sigs.k8s.io/kwok/cmd/kwok
    ) >&2
    # go.etcd.io/etcd/server/v3 builds as `server`.
    mv "$dir/bin.tmp/server" "$dir/bin.tmp/etcd"
    # kwok's own stages, from its module: nodes become Ready at once and keep a heartbeat (the
    # node lifecycle controller removes the not-ready taint, and would mark a silent node
    # NotReady), pods bound to them turn Running and Ready, and deleted pods go.
    local stages
    stages="$(cd "$module" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)/kustomize/stage"
    for f in node/fast/node-initialize.yaml node/heartbeat/node-heartbeat.yaml \
        pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
        cat "$stages/$f"
        echo "---"
    done >"$dir/bin.tmp/kwok-stages.yaml"
    rm -rf "$dir/bin" && mv "$dir/bin.tmp" "$dir/bin"
    echo "$dir/bin"
}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

certificates() {
    local dir=$1
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=fleetwright-test-ca" \
        -keyout "$dir/ca.key" -out "$dir/ca.crt" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" \
        -keyout "$dir/apiserver.key" -out "$dir/apiserver.csr" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc\n' >"$dir/san.ext"
    openssl x509 -req -in "$dir/apiserver.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" \
        -CAcreateserial -days 2 -extfile "$dir/san.ext" -out "$dir/apiserver.crt" 2>/dev/null
    # A serving certificate for a webhook on loopback (the tests' admission webhook), in DER too.
    openssl req -newkey rsa:2048 -nodes -subj "/CN=webhook" \
        -keyout "$dir/webhook.key" -out "$dir/webhook.csr" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1\n' >"$dir/webhook.ext"
    openssl x509 -req -in "$dir/webhook.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" \
        -CAcreateserial -days 2 -extfile "$dir/webhook.ext" -outform DER -out "$dir/webhook.crt.der" 2>/dev/null
    openssl pkcs8 -topk8 -nocrypt -in "$dir/webhook.key" -outform DER -out "$dir/webhook.key.der"
    openssl genrsa -out "$dir/sa.key" 2048 2>/dev/null
    openssl rsa -in "$dir/sa.key" -pubout -out "$dir/sa.pub" 2>/dev/null
}

kubeconfig() {
    local file=$1 server=$2 ca=$3 user=$4 token=$5
    cat >"$file" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster: {server: "$server", certificate-authority: "$ca"}
users:
- name: $user
  user: {token: "$token"}
contexts:
- name: $user
  context: {cluster: local, user: $user}
current-context: $user
EOF
}

launch() {
    local dir=$1 name=$2; shift 2
    "$@" >"$dir/$name.log" 2>&1 &
    echo "$!" >>"$dir/pids"
}

wait_ready() {
    local url=$1 token=$2 ca=$3 what=$4
    for _ in $(seq 1 300); do
        if curl -sf --cacert "$ca" -H "Authorization: Bearer $token" "$url" >/dev/null 2>&1; then
            return 0
        fi
        sleep 0.2
    done
    echo "control-plane: $what did not become ready" >&2
    return 1
}

start() {
    local dir=$1 bin
    bin=$(build)
    mkdir -p "$dir" && dir=$(cd "$dir" && pwd)
    # A clean cluster each time: a left-over etcd would hold the last run's objects.
    rm -rf "$dir/pids" "$dir/etcd" "$dir/audit.log"
    certificates "$dir"
    # The writes of Fleetwright's identity, at Metadata level: who wrote what, and nothing of
    # anyone else's (the controllers' writes would swamp it).
    cat >"$dir/audit-policy.yaml" <<'POLICY'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: Metadata
    users: ["fleetwright"]
    verbs: ["create", "update", "patch", "delete", "deletecollection"]
  - level: Metadata
    users: ["autoscaler"]
    omitStages: ["RequestReceived", "ResponseStarted"]
  - level: None
POLICY
    local admin fleetwright autoscaler etcd_port peer_port api_port
    admin=$(openssl rand -hex 16)
    fleetwright=$(openssl rand -hex 16)
    autoscaler=$(openssl rand -hex 16)
    printf '%s,admin,admin,system:masters\n%s,fleetwright,fleetwright,fleetwright\n%s,autoscaler,autoscaler,system:masters\n' \
        "$admin" "$fleetwright" "$autoscaler" >"$dir/tokens.csv"
    etcd_port=$(free_port); peer_port=$(free_port); api_port=$(free_port)
    local server="https://127.0.0.1:$api_port"
    kubeconfig "$dir/admin.kubeconfig" "$server" "$dir/ca.crt" admin "$admin"
    kubeconfig "$dir/fleetwright.kubeconfig" "$server" "$dir/ca.crt" fleetwright "$fleetwright"
    kubeconfig "$dir/autoscaler.kubeconfig" "$server" "$dir/ca.crt" autoscaler "$autoscaler"

    launch "$dir" etcd "$bin/etcd" --data-dir "$dir/etcd" --name local \
        --listen-client-urls "http://127.0.0.1:$etcd_port" \
        --advertise-client-urls "http://127.0.0.1:$etcd_port" \
        --listen-peer-urls "http://127.0.0.1:$peer_port" \
        --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
        --initial-cluster "local=http://127.0.0.1:$peer_port" \
        --unsafe-no-fsync --quota-backend-bytes 4294967296
    # Without controllers nothing would take the not-ready taint the TaintNodesByCondition
    # admission plugin puts on every new Node (the node lifecycle controller does, once the
    # node is Ready): leave it out then.
    # The tests compact every 10 s, so a continue token expires within a test; the scale bench
    # keeps the API server's default (5 minutes), as a real cluster's, since listing 200,000 pods
    # takes longer than 10 s.
    local plugins=ServiceAccount compaction=10s
    if [ "${FLEETWRIGHT_CONTROL_PLANE_PARTS:-all}" = api ]; then
        plugins=ServiceAccount,TaintNodesByCondition
        compaction=5m
    fi
    launch "$dir" kube-apiserver "$bin/kube-apiserver" \
        --etcd-servers "http://127.0.0.1:$etcd_port" --etcd-compaction-interval "$compaction" \
        --bind-address 127.0.0.1 --secure-port "$api_port" \
        --tls-cert-file "$dir/apiserver.crt" --tls-private-key-file "$dir/apiserver.key" \
        --client-ca-file "$dir/ca.crt" --token-auth-file "$dir/tokens.csv" \
        --authorization-mode RBAC \
        --service-account-key-file "$dir/sa.pub" \
        --service-account-signing-key-file "$dir/sa.key" \
        --service-account-issuer https://kubernetes.default.svc \
        --service-cluster-ip-range 10.96.0.0/16 \
        --enable-priority-and-fairness=false \
        --disable-admission-plugins "$plugins" \
        --audit-policy-file "$dir/audit-policy.yaml" --audit-log-path "$dir/audit.log" \
        --audit-log-mode blocking
    wait_ready "$server/readyz" "$admin" "$dir/ca.crt" kube-apiserver
    if [ "${FLEETWRIGHT_CONTROL_PLANE_PARTS:-all}" = api ]; then
        echo "control-plane: ready at $server ($dir; etcd and kube-apiserver only)" >&2
        return
    fi
    launch "$dir" kube-controller-manager "$bin/kube-controller-manager" \
        --kubeconfig "$dir/admin.kubeconfig" --leader-elect=false \
        --bind-address 127.0.0.1 --secure-port "$(free_port)" \
        --service-account-private-key-file "$dir/sa.key" --root-ca-file "$dir/ca.crt" \
        --controllers '*,-nodeipam,-cloud-node-lifecycle,-service-lb-controller,-route' \
        --concurrent-deployment-syncs 10 --concurrent-replicaset-syncs 10
    launch "$dir" kube-scheduler "$bin/kube-scheduler" \
        --kubeconfig "$dir/admin.kubeconfig" --leader-elect=false \
        --bind-address 127.0.0.1 --secure-port "$(free_port)"
    launch "$dir" kwok "$bin/kwok" \
        --kubeconfig "$dir/admin.kubeconfig" --config "$bin/kwok-stages.yaml" \
        --manage-all-nodes=false \
        --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
        --server-address "127.0.0.1:$(free_port)"
    echo "control-plane: ready at $server ($dir)" >&2
}

stop() {
    local dir=$1
    [ -f "$dir/pids" ] || return 0
    # The reverse order of starting: kwok and the controllers first, etcd last.
    tac "$dir/pids" | while read -r pid; do
        kill "$pid" 2>/dev/null || true
    done
    tac "$dir/pids" | while read -r pid; do
        for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
    done
    rm -f "$dir/pids"
}

case "${1:-}" in
    build) build ;;
    start) start "${2:?DIR}" ;;
    stop) stop "${2:?DIR}" ;;
    run)
        dir="${2:?DIR}"; shift 2
        [ "${1:-}" = "--" ] && shift
        start "$dir"
        dir=$(cd "$dir" && pwd)
        trap 'stop "$dir"' EXIT
        KUBECONFIG="$dir/admin.kubeconfig" FLEETWRIGHT_KUBECONFIG="$dir/fleetwright.kubeconfig" \
            FLEETWRIGHT_CONTROL_PLANE_DIR="$dir" "$@"
        ;;
    *) sed -n '2,20p' "$0" >&2; exit 2 ;;
esac
