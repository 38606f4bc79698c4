#!/usr/bin/env bash
# Dependencies go one way: every #include "layer/..." in src/<layer> must name the layer itself
# or one below it ("gossip/" is the public header folder include/gossip, which only the library's
# API and the Python module over it use). Fails naming each file and include that points up (or
# sideways).
set -euo pipefail
cd "$(dirname "$0")/../src"
declare -A below=(
  [common]=""
  [kernels]="common"
  [model]="common kernels"
  [topology]="common"
  [wire]="common"
  [transport]="common wire"
  [membership]="common wire transport"
  [algorithms]="common wire transport kernels topology"
  [control]="common wire transport topology"
  [peer]="common kernels model topology wire transport membership algorithms control"
  [api]="gossip common kernels wire peer"
  [python]="gossip common"
)
bad=0 files=0
for layer in */; do
  layer=${layer%/}
  if [[ -z ${below[$layer]+set} ]]; then echo "src/$layer: a folder that is no known layer (add it to tests/check_layers.sh)"; bad=$((bad + 1)); continue; fi
  while IFS= read -r -d '' f; do
    files=$((files + 1))
    while IFS= read -r inc; do
      to=${inc%%/*}
      [[ $to == "$layer" || " ${below[$layer]} " == *" $to "* ]] && continue
      echo "src/${f#./}: includes \"$inc\" ($layer may include only: $layer ${below[$layer]})"
      bad=$((bad + 1))
    done < <(grep -oP '^#include "\K[a-z_]+/[^"]+' "$f" || true)
  done < <(find "$layer" -type f \( -name '*.h' -o -name '*.cc' -o -name '*.cu' \) -print0)
done
echo "layers: $files files checked, $bad includes point upwards"
[[ $bad == 0 ]]
