#!/usr/bin/env bash
# A real one-node Slurm for tests/cluster_test.cc: configures munge, slurmctld and slurmd with
# their state, keys and logs under DIR, inside a network namespace of their own that has only
# loopback (so nothing listens on another address), runs `srun -n 4 PEER --config YAML` there,
# prints what the ranks printed, and stops everything. Exits 77 with the reason when Slurm
# cannot start here (not installed, not root, no network namespaces).
#   tests/slurm_single_node.sh DIR PEER YAML
set -uo pipefail
dir=$1 peer=$2 yaml=$3
PATH=$PATH:/usr/sbin:/sbin
skip() { echo "skipped: $*"; exit 77; }
for b in slurmctld slurmd srun sinfo munged ip nsenter; do
  command -v "$b" >/dev/null || skip "$b is not installed (Debian slurm-wlm, munge, iproute2)"
done
[ "$(id -u)" = 0 ] || skip "slurmd and a network namespace need root"
ns=gslurm-$$
ip netns add "$ns" 2>/dev/null || skip "cannot make a network namespace here (no CAP_NET_ADMIN?)"
# nsenter, not `ip netns exec`, which would also remount /sys (and hide the cgroup mounts slurmd needs).
# The daemons start as `"${in_ns[@]}" daemon &`, so that $! is the daemon itself (nsenter execs).
in_ns=(nsenter --net="/run/netns/$ns")
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  for _ in $(seq 30); do  # slurmctld stops its slurmscriptd on the way out
    alive=0
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ $alive = 0 ] && break
    sleep 0.1
  done
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
  ip netns del "$ns" 2>/dev/null
  ip link del "${veth:-none}a" 2>/dev/null
}
trap cleanup EXIT
"${in_ns[@]}" ip link set lo up
# getaddrinfo(AI_ADDRCONFIG), which Slurm binds with, finds nothing where loopback is the only
# interface: one address on one end of a veth pair whose other end stays down, unaddressed.
veth=gsl$$
ip link add "${veth}a" type veth peer name "${veth}b" && ip link set "${veth}b" netns "$ns" &&
  "${in_ns[@]}" ip addr add 10.213.92.1/32 dev "${veth}b" && "${in_ns[@]}" ip link set "${veth}b" up ||
  skip "cannot give the namespace an interface"

mkdir -p "$dir/munge" "$dir/state" "$dir/spool"
chmod 700 "$dir" "$dir/munge"
head -c 1024 /dev/urandom > "$dir/munge/munge.key"
chmod 400 "$dir/munge/munge.key"
socket=$dir/munge/munge.socket
"${in_ns[@]}" munged --force --foreground --key-file="$dir/munge/munge.key" --socket="$socket" \
  --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" --seed-file="$dir/munge/seed" \
  > "$dir/munge/munged.out" 2>&1 &
pids+=($!)

conf=$dir/slurm.conf
cat > "$conf" <<CONF
ClusterName=gossiptest
SlurmctldHost=localhost(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SlurmdParameters=config_overrides
NodeName=localhost NodeAddr=127.0.0.1 CPUs=4 State=UNKNOWN
PartitionName=test Nodes=localhost Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
export SLURM_CONF=$conf
for _ in $(seq 50); do [ -S "$socket" ] && break; sleep 0.1; done
[ -S "$socket" ] || { cat "$dir/munge/munged.log" 2>/dev/null; skip "munged did not start"; }
"${in_ns[@]}" slurmctld -D -c -f "$conf" > "$dir/slurmctld.out" 2>&1 &
pids+=($!)
"${in_ns[@]}" slurmd -D -N localhost -f "$conf" > "$dir/slurmd.out" 2>&1 &
pids+=($!)
state=""
for _ in $(seq 150); do
  state=$("${in_ns[@]}" sinfo -h -N -o %T 2>/dev/null | head -1)
  [ "$state" = idle ] && break
  sleep 0.2
done
if [ "$state" != idle ]; then
  tail -5 "$dir/slurmctld.log" "$dir/slurmd.log" "$dir/slurmctld.out" "$dir/slurmd.out" 2>/dev/null
  skip "the node did not come up (state '$state')"
fi
echo "slurm: node localhost is $state; srun -n 4 $peer --config $yaml"
"${in_ns[@]}" timeout -s KILL ${SRUN_LIMIT:-200} srun -n 4 --overcommit -t 5 "$peer" --config "$yaml"
