# Sourced by the emulated-network benchmarks (bench/netem.sh, bench/netem_gpt.sh); root only.
# `netns_start NAME N RATE DELAY` checks for root, builds (scripts/setup.sh), sends the script's
# output to the terminal and $BENCH_OUT/NAME.md (bench/lib.sh, sourced here), makes NETNS_DIR
# and puts N peers each in its own network namespace with a veth into one bridge; each peer's
# egress is shaped with `tc netem delay DELAY rate RATE` (DELAY one way between any two peers,
# RATE out of each), or by `tbf` to RATE with no delay where the kernel has no sch_netem. Sets
# NETNS_LINK to a description of the link; removes everything (NETNS_DIR too) on exit.
# Peer i is $NETNS_SUBNET.(i+1); `netns_peers N PORT` prints the YAML list of their endpoints and
# `netns_run YAML N LOGPREFIX` runs the N peers of YAML (kept in NETNS_DIR), one per namespace,
# and fails if one does.
source bench/lib.sh
NETNS_TAG=g$$                 # names: bridge $tag-br, namespaces $tag-0.., host-side veths $tag-h0..
NETNS_SUBNET=10.213.77
netns_down() {
  pkill -f "gossip-peer --config $NETNS_DIR/" 2>/dev/null || true
  for i in $(seq 0 $((NETNS_N - 1))); do ip netns del "$NETNS_TAG-$i" 2>/dev/null || true; done
  ip link del "$NETNS_TAG-br" 2>/dev/null || true
  rm -rf "$NETNS_DIR"
}
netns_start() {
  NETNS_N=$2
  local rate=$3 delay=$4 tag=$NETNS_TAG shaping="" i ns
  [[ $EUID == 0 ]] || { echo "$0: needs root (network namespaces, tc)" >&2; exit 2; }
  bash scripts/setup.sh >/dev/null
  bench_tee "$1"
  NETNS_DIR=$(mktemp -d)
  trap netns_down EXIT
  ip link add "$tag-br" type bridge
  ip link set "$tag-br" up
  for i in $(seq 0 $((NETNS_N - 1))); do
    ns=$tag-$i
    ip netns add "$ns"
    ip link add "$tag-h$i" type veth peer name "$tag-p$i"
    ip link set "$tag-p$i" netns "$ns"
    ip link set "$tag-h$i" master "$tag-br" up
    ip -n "$ns" link set lo up
    ip -n "$ns" link set "$tag-p$i" name eth0
    ip -n "$ns" addr add "$NETNS_SUBNET.$((i + 1))/24" dev eth0
    ip -n "$ns" link set eth0 up
    if [[ -z $shaping || $shaping == netem ]] &&
       ip netns exec "$ns" tc qdisc add dev eth0 root netem delay "$delay" rate "$rate" limit 100000 2>/dev/null; then
      shaping=netem
    else
      ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate "$rate" burst 256kb latency 100ms
      shaping=tbf
    fi
  done
  NETNS_LINK="$rate, $delay one way (netem)"
  [[ $shaping == tbf ]] && NETNS_LINK="$rate (tbf), no added delay: this kernel has no sch_netem"
  return 0
}
netns_peers() {
  echo "peers:"
  for i in $(seq 0 $(($1 - 1))); do echo "  - {id: $i, endpoint: tcp://$NETNS_SUBNET.$((i + 1)):$2}"; done
}
netns_run() {
  local i job failed=0 pids=()
  for i in $(seq 0 $(($2 - 1))); do
    ip netns exec "$NETNS_TAG-$i" build/bin/gossip-peer --config "$1" --rank "$i" > "$3$i" 2>&1 &
    pids+=($!)
  done
  for job in "${pids[@]}"; do wait "$job" || failed=1; done
  if [[ $failed == 1 ]]; then echo "$0: a peer of $1 failed:" >&2; tail -n 5 "$3"* >&2; exit 1; fi
}
