#!/usr/bin/env bash
# Keeps the README's how-to commands true: runs them as written — the demo's YAML with the
# launcher's plot, a join into that run, the consensus tool on it with its plot, and the key
# generator — replacing only the README's example endpoint by a live peer's (and running one slowed
# epoch, so the join and the tool find the run going without loading the machine for long). Fails naming the command that did not work.
# Usage: readme_commands.sh SOURCE_DIR BINARY_DIR
set -euo pipefail
src=$(cd "$1" && pwd) bin=$(cd "$2" && pwd)
work=$(mktemp -d /tmp/gossip-readme-XXXXXX)
launch_pid="" join_pid=""
cleanup() {
  for p in $launch_pid $join_pid; do kill -TERM -- "-$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "readme_commands.sh: $*" >&2; for f in "$work"/*.log; do echo "--- $f" >&2; tail -n 15 "$f" >&2; done; exit 1; }
ln -s "$bin" "$work/build"
ln -s "$src/configs" "$work/configs"
cd "$work"

# The commands: the indented lines of the README's "## How to" section that start with build/bin/
# (a trailing "# comment" cut off).
mapfile -t commands < <(awk '/^## How to/ {on = 1; next} /^## / {on = 0}
  on && /^    build\/bin\// {sub(/^    /, ""); sub(/ +#.*$/, ""); print}' "$src/README.md")
pick() {  # the one README command containing $1
  local c found=""
  for c in "${commands[@]}"; do [[ $c == *"$1"* ]] && found=$c; done
  [[ -n $found ]] || fail "the README's how-to has no command with '$1'"
  echo "$found"
}
with_endpoint() { sed -E "s#tcp://127\.0\.0\.1:[0-9]+#$2#" <<< "$1"; }

launch=$(pick "gossip-launch configs/ring4.yaml --plot")
join=$(pick " --join ")
consensus=$(pick "gossip-consensus --peer")
keygen=$(pick "gossip-keygen")

echo "run: $launch --epochs 1 --slowdown 3"
setsid bash -c "$launch --epochs 1 --slowdown 3" > launch.log 2>&1 &
launch_pid=$!
endpoint=""
for _ in $(seq 600); do
  endpoint=$(grep -oP '^\[peer 0\] bound \Ktcp://127\.0\.0\.1:[0-9]+' launch.log || true)
  [[ -n $endpoint ]] && break
  sleep 0.1
done
[[ -n $endpoint ]] || fail "'$launch' printed no '[peer 0] bound' line"

join=$(with_endpoint "$join" "$endpoint")
echo "run: $join"
setsid bash -c "$join" > join.log 2>&1 &
join_pid=$!
consensus=$(with_endpoint "$consensus" "$endpoint")
echo "run: $consensus"
timeout 240 bash -c "$consensus" > consensus.log 2>&1 || fail "'$consensus' failed"
grep -q "<svg" xi.svg 2>/dev/null || fail "'$consensus' wrote no xi.svg"
grep -qE '^ *[0-9]+ .*[0-9]e[-+][0-9]' consensus.log || fail "'$consensus' printed no measurement row"

wait "$join_pid" || fail "'$join' failed"
join_pid=""
wait "$launch_pid" || fail "'$launch' failed"
launch_pid=""
grep -q "joined as peer" join.log || fail "'$join' did not join"
crc=$(grep -oP 'final: .* params_crc \K[0-9a-f]+' join.log) || fail "'$join' printed no final line"
grep -q "params_crc $crc " launch.log || fail "the joiner's model $crc is not the run's"
grep -q "4 of 4 peers succeeded, 1 distinct final model" launch.log || fail "'$launch' did not end with one model"
grep -q "<svg" run.svg 2>/dev/null || fail "'$launch' wrote no run.svg"

echo "run: $keygen"
bash -c "$keygen" > keygen.log 2>&1 || fail "'$keygen' failed"
[[ $(ls keys | wc -l) -ge 4 ]] || fail "'$keygen' wrote $(ls keys | wc -l) files into keys/"
echo "readme_commands.sh: the how-to's join, consensus, plot and keygen commands work as written"
