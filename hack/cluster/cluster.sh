#!/usr/bin/env bash
# A one-node Kubernetes cluster on this machine, without Docker: etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kubelet and kube-proxy as host processes, containerd and runc from Debian, pods on a CNI
# bridge, CoreDNS as a Deployment, images built by hack/images (no registry). docs/kubernetes.md says why each
# setting is what it is.
#   hack/cluster/cluster.sh up     # make cluster: start it (or check it runs), print the KUBECONFIG line
#   hack/cluster/cluster.sh down   # make cluster-down: stop it and undo every change it made to the host
#   hack/cluster/cluster.sh images # rebuild and import the images (after a code change)
# Needs root (containerd, mounts, network). Everything lives under .run/cluster/ of this checkout.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
RUN=$ROOT/.run/cluster
LOGS=$RUN/logs
PIDS=$RUN/pids
PKI=$RUN/pki

NODE=lbplane-node
# The node's address: on an interface of its own, in the benchmarking range; never eth0's. The interface is an
# empty bridge: this kernel has no dummy interfaces ("Unknown device type"), and a bridge with no ports serves
# the same purpose, a local address that is up whatever happens to the pods.
NODE_DEV=lbplane0
NODE_IP=198.19.255.1
# Pods: this node's /24 of the cluster's 198.18.0.0/16, on the CNI bridge.
CLUSTER_CIDR=198.18.0.0/16
POD_CIDR=198.18.0.0/24
POD_GW=198.18.0.1
BRIDGE=lbplane-br0
SERVICE_CIDR=198.19.0.0/20
KUBERNETES_SVC_IP=198.19.0.1
DNS_IP=198.19.0.10
ETCD_CLIENT=127.0.0.1:12379
ETCD_PEER=127.0.0.1:12380
APISERVER=https://$NODE_IP:6443
CONTAINERD_SOCK=$RUN/containerd/containerd.sock
KUBECONFIG_ADMIN=$RUN/kubeconfig
# The images the cluster itself runs (hack/images builds them).
PAUSE_IMAGE=lbplane.local/pause:1
COREDNS_IMAGE=lbplane.local/coredns:$(sed -n 's/^COREDNS_VERSION=//p' hack/tools.sh)
# Host folders the kubelet or containerd create whatever their configuration says; removed by down when up
# found them absent.
HOST_DIRS="/var/log/pods /var/log/containers /usr/libexec/kubernetes /run/containerd /var/lib/cni /run/nri /etc/cni /opt/cni
/var/lib/kubelet /etc/kubernetes /var/lib/containerd"
# Sysctls the node's parts set: saved by up, restored by down.
SYSCTLS="vm.overcommit_memory kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys kernel.keys.root_maxbytes
net.ipv4.ip_forward net.ipv4.conf.all.forwarding net.ipv4.conf.default.forwarding net.ipv4.conf.all.route_localnet
net.bridge.bridge-nf-call-iptables net.bridge.bridge-nf-call-ip6tables net.netfilter.nf_conntrack_max
net.netfilter.nf_conntrack_tcp_timeout_established net.netfilter.nf_conntrack_tcp_timeout_close_wait
net.ipv6.conf.all.forwarding net.ipv6.conf.default.forwarding"

tool() { hack/tools.sh "path-$1"; }
log() { echo "cluster: $*" >&2; }
die() { echo "cluster: $*" >&2; exit 1; }
kc() { kubectl --kubeconfig "$KUBECONFIG_ADMIN" "$@"; }

# wait_for tries a command every second until it succeeds or the time (seconds) is up.
wait_for() { # seconds description command...
  local n=$1 what=$2; shift 2
  local end=$((SECONDS + n))
  until "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$end" ] || die "timed out after ${n}s waiting for $what (logs in $LOGS)"
    sleep 1
  done
}

# start runs a process in the background, its output in logs/<name>.log and its pid in pids/<name>.
start() { # name command...
  local name=$1; shift
  if [ -f "$PIDS/$name" ] && kill -0 "$(cat "$PIDS/$name")" 2>/dev/null; then return 0; fi
  setsid "$@" >>"$LOGS/$name.log" 2>&1 < /dev/null &
  echo $! > "$PIDS/$name"
}

stop() { # name
  local f=$PIDS/$1 pid
  [ -f "$f" ] || return 0
  pid=$(cat "$f")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

# --- certificates: one CA, a serving certificate for the API server, a client certificate per component.
cert() { # name subject [extensions]
  local name=$1 subj=$2 ext=${3:-}
  [ -f "$PKI/$name.crt" ] && return 0
  openssl genrsa -out "$PKI/$name.key" 2048 2>/dev/null
  openssl req -new -key "$PKI/$name.key" -subj "$subj" -out "$PKI/$name.csr" 2>/dev/null
  printf '%s\n' "basicConstraints=CA:FALSE" "keyUsage=critical,digitalSignature,keyEncipherment" "$ext" > "$PKI/$name.ext"
  openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial -days 30 \
    -extfile "$PKI/$name.ext" -out "$PKI/$name.crt" 2>/dev/null
  rm -f "$PKI/$name.csr" "$PKI/$name.ext"
}

kubeconfig() { # file user
  local f=$1 user=$2
  [ -f "$f" ] && return 0
  cat > "$f" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: lbplane
  cluster: {server: "$APISERVER", certificate-authority: "$PKI/ca.crt"}
users:
- name: $user
  user: {client-certificate: "$PKI/$user.crt", client-key: "$PKI/$user.key"}
contexts:
- name: lbplane
  context: {cluster: lbplane, user: $user}
current-context: lbplane
EOF
}

pki() {
  mkdir -p "$PKI"
  if [ ! -f "$PKI/ca.crt" ]; then
    openssl req -x509 -newkey rsa:2048 -nodes -keyout "$PKI/ca.key" -out "$PKI/ca.crt" -days 30 \
      -subj "/CN=lbplane-cluster-ca" 2>/dev/null
  fi
  [ -f "$PKI/sa.key" ] || { openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null; openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null; }
  cert apiserver "/CN=kube-apiserver" "extendedKeyUsage=serverAuth
subjectAltName=IP:$NODE_IP,IP:$KUBERNETES_SVC_IP,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  cert admin "/O=system:masters/CN=lbplane-admin" "extendedKeyUsage=clientAuth"
  cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "extendedKeyUsage=clientAuth"
  cert kubelet "/O=system:nodes/CN=system:node:$NODE" "extendedKeyUsage=clientAuth"
  cert kubelet-serving "/CN=$NODE" "extendedKeyUsage=serverAuth
subjectAltName=IP:$NODE_IP,DNS:$NODE"
  cert controller-manager "/CN=system:kube-controller-manager" "extendedKeyUsage=clientAuth"
  cert scheduler "/CN=system:kube-scheduler" "extendedKeyUsage=clientAuth"
  cert kube-proxy "/CN=system:kube-proxy" "extendedKeyUsage=clientAuth"
  for u in admin kubelet controller-manager scheduler kube-proxy; do kubeconfig "$RUN/kubeconfig-$u" "$u"; done
  cp "$RUN/kubeconfig-admin" "$KUBECONFIG_ADMIN"
}

# --- host state: recorded before the first change, so that down can undo exactly what up did.
record_host() {
  [ -f "$RUN/host/recorded" ] && return 0
  mkdir -p "$RUN/host"
  for s in $SYSCTLS; do
    v=$(sysctl -n "$s" 2>/dev/null) && printf '%s=%s\n' "$s" "$v" >> "$RUN/host/sysctls"
  done
  nft list tables > "$RUN/host/nft-tables" 2>/dev/null || true
  for d in $HOST_DIRS; do [ -e "$d" ] && echo "$d" >> "$RUN/host/dirs"; done
  mountpoint -q /run/netns && touch "$RUN/host/netns-mounted"
  touch "$RUN/host/dirs" "$RUN/host/recorded"
}

network() {
  if ! ip link show "$NODE_DEV" >/dev/null 2>&1; then
    ip link add "$NODE_DEV" type bridge
  fi
  # replace, not add: the address may be there already (a host left by a run that was cut off), and under
  # pipefail a check piped into grep -q can fail by SIGPIPE when it matches.
  ip addr replace "$NODE_IP/32" dev "$NODE_DEV"
  ip link set "$NODE_DEV" up
  mkdir -p "$RUN/cni/net.d" "$RUN/cni/ipam"
  # hairpinMode: a pod reaching itself through its Service; isGateway: pods route through the host (the API
  # server, the node's address, NodePorts); no masquerade: pods are seen with their own addresses.
  cat > "$RUN/cni/net.d/10-lbplane.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "lbplane",
  "plugins": [
    {"type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "dataDir": "$RUN/cni/ipam", "ranges": [[{"subnet": "$POD_CIDR", "gateway": "$POD_GW"}]],
              "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "loopback"}
  ]
}
EOF
}

containerd_up() {
  mkdir -p "$RUN/containerd"
  cat > "$RUN/containerd/config.toml" <<EOF
version = 2
root = "$RUN/containerd/root"
state = "$RUN/containerd/state"
[grpc]
  address = "$CONTAINERD_SOCK"
[ttrpc]
  address = "$RUN/containerd/containerd.sock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$RUN/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # The machine withholds CAP_SYS_RESOURCE: no process may lower its oom_score_adj, and the kubelet asks
  # for -998 for every sandbox (docs/kubernetes.md).
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$RUN/cni/net.d"
EOF
  start containerd containerd --config "$RUN/containerd/config.toml"
  wait_for 60 containerd ctr --address "$CONTAINERD_SOCK" version
}

images() {
  log "building the images (hack/images) and importing them into containerd"
  go run ./hack/images -out "$RUN/images" "$@"
  local f
  for f in "$RUN"/images/*.tar; do
    ctr --address "$CONTAINERD_SOCK" -n k8s.io images import --no-unpack=false "$f" >/dev/null
  done
}

etcd_up() {
  mkdir -p "$RUN/etcd"
  start etcd "$(tool etcd)" --name "$NODE" --data-dir "$RUN/etcd" \
    --listen-client-urls "http://$ETCD_CLIENT" --advertise-client-urls "http://$ETCD_CLIENT" \
    --listen-peer-urls "http://$ETCD_PEER" --initial-advertise-peer-urls "http://$ETCD_PEER" \
    --initial-cluster "$NODE=http://$ETCD_PEER" --listen-metrics-urls "" --log-level warn
  wait_for 60 etcd curl -sf "http://$ETCD_CLIENT/health"
}

apiserver_up() {
  start kube-apiserver "$(tool kube-apiserver)" --etcd-servers "http://$ETCD_CLIENT" \
    --bind-address "$NODE_IP" --advertise-address "$NODE_IP" --secure-port 6443 \
    --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
    --client-ca-file "$PKI/ca.crt" --authorization-mode Node,RBAC --anonymous-auth=true \
    --service-cluster-ip-range "$SERVICE_CIDR" --service-node-port-range 30000-32767 \
    --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
    --service-account-issuer "https://kubernetes.default.svc.cluster.local" \
    --kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt" --kubelet-client-key "$PKI/apiserver-kubelet-client.key" \
    --kubelet-preferred-address-types InternalIP --allow-privileged=true \
    --enable-admission-plugins NodeRestriction --profiling=false
  wait_for 120 kube-apiserver kc get --raw /readyz
}

kubelet_up() {
  mkdir -p "$RUN/kubelet" "$RUN/pod-logs" "$RUN/volume-plugins"
  cat > "$RUN/kubelet-config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: "$PKI/ca.crt"}
authorization: {mode: Webhook}
tlsCertFile: "$PKI/kubelet-serving.crt"
tlsPrivateKeyFile: "$PKI/kubelet-serving.key"
clusterDomain: cluster.local
clusterDNS: [$DNS_IP]
# Pods with dnsPolicy Default get no name server: the host's is in a private range.
resolvConf: ""
# This machine: cgroup v1 (hybrid), swap allowed, no systemd.
failCgroupV1: false
failSwapOn: false
cgroupDriver: cgroupfs
# An image removed by GC cannot be pulled back (there is no registry): never collect images.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
# Absolute thresholds: a percentage of a large, busy disk (1 % of 270 GB is 2.7 GB) evicted the chart's pods on
# a CI host with 2.6 GB free. The node needs about 1.5 GB (images, pod logs, etcd); up() checks it has that.
evictionHard: {memory.available: "100Mi", nodefs.available: "256Mi", imagefs.available: "256Mi", nodefs.inodesFree: "1%", imagefs.inodesFree: "1%"}
containerRuntimeEndpoint: "unix://$CONTAINERD_SOCK"
podLogsDir: "$RUN/pod-logs"
volumePluginDir: "$RUN/volume-plugins"
podCIDR: $POD_CIDR
maxPods: 110
serializeImagePulls: false
EOF
  start kubelet "$(tool kubelet)" --config "$RUN/kubelet-config.yaml" --kubeconfig "$RUN/kubeconfig-kubelet" \
    --root-dir "$RUN/kubelet" --node-ip "$NODE_IP" --hostname-override "$NODE" --v 1
  wait_for 120 "the node to register" kc get node "$NODE"
}

kcm_up() {
  start kube-controller-manager "$(tool kube-controller-manager)" --kubeconfig "$RUN/kubeconfig-controller-manager" \
    --authentication-kubeconfig "$RUN/kubeconfig-controller-manager" --authorization-kubeconfig "$RUN/kubeconfig-controller-manager" \
    --bind-address "$NODE_IP" --use-service-account-credentials \
    --service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" \
    --cluster-signing-cert-file "$PKI/ca.crt" --cluster-signing-key-file "$PKI/ca.key" \
    --allocate-node-cidrs --cluster-cidr "$CLUSTER_CIDR" --node-cidr-mask-size 24 --service-cluster-ip-range "$SERVICE_CIDR" \
    --profiling=false
}

scheduler_up() {
  start kube-scheduler "$(tool kube-scheduler)" --kubeconfig "$RUN/kubeconfig-scheduler" \
    --authentication-kubeconfig "$RUN/kubeconfig-scheduler" --authorization-kubeconfig "$RUN/kubeconfig-scheduler" \
    --bind-address "$NODE_IP" --profiling=false
}

proxy_up() {
  cat > "$RUN/kube-proxy-config.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: "$RUN/kubeconfig-kube-proxy"}
hostnameOverride: $NODE
mode: nftables
clusterCIDR: $CLUSTER_CIDR
detectLocalMode: ClusterCIDR
# NodePorts on the node's address only (never eth0's).
nodePortAddresses: ["$NODE_IP/32"]
bindAddress: $NODE_IP
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
# Leave the host's conntrack settings alone.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF
  start kube-proxy "$(tool kube-proxy)" --config "$RUN/kube-proxy-config.yaml"
}

coredns_up() {
  sed -e "s|@DNS_IP@|$DNS_IP|g" -e "s|@IMAGE@|$COREDNS_IMAGE|g" hack/cluster/coredns.yaml | kc apply -f - >/dev/null
}

node_ready() {
  [ "$(kc get node "$NODE" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}')" = True ]
}

# The node keeps its images, pod logs and etcd under $RUN: fail now, saying so, rather than have pods evicted
# or left Pending on a full disk half way through a test.
disk_check() {
  local free_kib
  free_kib=$(df -Pk "$RUN" | awk 'NR == 2 {print $4}')
  [ "$free_kib" -ge $((1536 * 1024)) ] ||
    die "only $((free_kib / 1024)) MiB free on the filesystem of .run/cluster; the cluster needs 1536 MiB (images, pod logs, etcd): free some space (e.g. go clean -cache) and run again"
  log "$((free_kib / 1024 / 1024)) GiB free for the node's images, logs and etcd"
}

up() {
  [ "$(id -u)" = 0 ] || die "needs root (containerd, mounts, the node's network)"
  local t0=$SECONDS
  log "installing the tools (hack/tools.sh cluster; the first time builds the Kubernetes binaries, one at a time)"
  hack/tools.sh cluster
  log "tools ready after $((SECONDS - t0))s"
  mkdir -p "$RUN" "$LOGS" "$PIDS"
  disk_check
  record_host
  pki
  network
  etcd_up
  apiserver_up
  containerd_up
  images
  kubelet_up
  kcm_up
  scheduler_up
  proxy_up
  wait_for 120 "the node to be Ready" node_ready
  coredns_up
  wait_for 180 "CoreDNS to be available" kc -n kube-system wait --for=condition=Available deployment/coredns --timeout=5s
  wait_for 60 "the default ServiceAccount" kc -n default get serviceaccount default
  log "up after $((SECONDS - t0))s"
  echo "export KUBECONFIG=$KUBECONFIG_ADMIN"
}

down() {
  [ "$(id -u)" = 0 ] || die "needs root"
  [ -d "$RUN" ] || { log "nothing to do"; return 0; }
  for c in kube-proxy kube-scheduler kube-controller-manager kubelet; do stop "$c"; done
  # Every pod, then containerd, then its shims (those serving this containerd's address only).
  if [ -S "$CONTAINERD_SOCK" ]; then
    local crictl; crictl=$(tool crictl)
    if [ -x "$crictl" ]; then
      "$crictl" --runtime-endpoint "unix://$CONTAINERD_SOCK" --timeout 30s stopp $("$crictl" --runtime-endpoint "unix://$CONTAINERD_SOCK" pods -q 2>/dev/null) >/dev/null 2>&1 || true
      "$crictl" --runtime-endpoint "unix://$CONTAINERD_SOCK" --timeout 30s rmp -a -f >/dev/null 2>&1 || true
    fi
  fi
  stop containerd
  local pid
  for pid in $(pgrep -f "containerd-shim-runc-v2 .*-address $CONTAINERD_SOCK" || true); do kill -9 "$pid" 2>/dev/null || true; done
  # Container processes whose shim is gone: in the cluster's cgroups.
  for d in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/*/k8s.io; do
    [ -d "$d" ] || continue
    find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null | while read -r pid; do kill -9 "$pid" 2>/dev/null || true; done
  done
  stop kube-apiserver
  stop etcd
  # Mounts under the run folder (the kubelet binds its root onto itself; pod volumes; overlay snapshots),
  # deepest first.
  local m
  for _ in 1 2 3; do
    for m in $(awk -v r="$RUN" 'index($2, r) == 1 {print $2}' /proc/self/mounts | sort -r); do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
  done
  # Network namespaces containerd made (cni-*), and /run/netns itself when up found it unmounted.
  for m in /run/netns/cni-*; do
    [ -e "$m" ] || continue
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
    rm -f "$m"
  done
  if [ -f "$RUN/host/recorded" ] && [ ! -f "$RUN/host/netns-mounted" ] && mountpoint -q /run/netns && [ -z "$(ls -A /run/netns)" ]; then
    umount /run/netns 2>/dev/null || umount -l /run/netns || true
    rmdir /run/netns 2>/dev/null || true
  fi
  # Cgroups: kubepods under every v1 controller (and the unified hierarchy), and k8s.io (containerd's, for
  # sandboxes without a parent), depth first.
  for d in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods /sys/fs/cgroup/*/k8s.io /sys/fs/cgroup/k8s.io; do
    [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done
  # Network: the bridge, veths went with their namespaces, the node's dummy interface.
  ip link del "$BRIDGE" 2>/dev/null || true
  ip link del "$NODE_DEV" 2>/dev/null || true
  if [ -f "$RUN/host/recorded" ]; then
    # nftables tables that up did not find (the kubelet's iptables-nft tables, kube-proxy's).
    nft list tables 2>/dev/null | while read -r _ fam name; do
      grep -qx "table $fam $name" "$RUN/host/nft-tables" || nft delete table "$fam" "$name" 2>/dev/null || true
    done
    while IFS='=' read -r k v; do
      [ "$(sysctl -n "$k" 2>/dev/null)" = "$v" ] || sysctl -q -w "$k=$v" >/dev/null 2>&1 || log "could not restore $k=$v"
    done < "$RUN/host/sysctls"
    for d in $HOST_DIRS; do
      grep -qx "$d" "$RUN/host/dirs" || rm -rf "$d"
    done
  fi
  rm -rf "$RUN"
  log "down: the host is as before"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  images) shift; mkdir -p "$RUN"; images "$@" ;;
  kubeconfig) echo "$KUBECONFIG_ADMIN" ;;
  # step: run parts of up by name (record_host pki network etcd_up apiserver_up containerd_up images kubelet_up
  # kcm_up scheduler_up proxy_up coredns_up), to debug one of them.
  step) shift; mkdir -p "$RUN" "$LOGS" "$PIDS"; for s in "$@"; do "$s"; done ;;
  *) echo "usage: $0 up|down|images|kubeconfig" >&2; exit 2 ;;
esac
