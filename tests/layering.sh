#!/usr/bin/env bash
# The include arrows between the code's layers run one way (README, "Layout"). From the top:
#
#   src/api -> src/driver -> src/target -> src/codegen -> src/lower -> src/fusion -> src/passes
#   -> src/testing -> src/reference -> src/ir -> runtime/ (backends, caches) -> runtime/support
#
# A folder may include its own headers and those of the folders after it, never one before it.
# (src/lower reads the plan it lowers, fusion/plan.h, so it sits above the planner; the planner
# prices candidates through the target's Scheduler, fusion/schedule.h, and includes no lowering.)
# Prints every include that climbs, and fails if there is one.
set -euo pipefail
cd "$(dirname "$0")/.."
order=(api driver target codegen lower fusion passes testing reference ir runtime)
bad=0
for ((i = 0; i < ${#order[@]}; i++)); do
  d=${order[$i]}
  dir=src/$d
  [[ $d == runtime ]] && dir=runtime
  for ((j = 0; j < i; j++)); do
    above=${order[$j]}
    if hits=$(grep -rnE "#include \"${above}/" "$dir" --include='*.h' --include='*.cpp'); then
      echo "$hits" | sed "s|^|$d includes $above (above it): |"
      bad=1
    fi
  done
done
# Below the runtime's backends, its support library includes only itself.
if hits=$(grep -rnE '#include "' runtime/support | grep -v '#include "runtime/support/'); then
  echo "$hits" | sed 's|^|runtime/support includes something above it: |'
  bad=1
fi
exit $bad
