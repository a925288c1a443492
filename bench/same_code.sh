#!/usr/bin/env bash
# Whether two builds of `stitch` make the same plans and code: `stitch plan --format json` and
# `stitch codegen --emit source` for host, sm_90 and gfx90a on every graph of examples/,
# bench/cpu/graphs/, bench/torch/pieces/ and bench/gpu/graphs/ (symbolic dims at 64), compared
# with 16-hex-digit names (symbols hash the build) masked. Host code is planned for the machine
# each build measures (its cache directory's profile): graphs whose plan is near a tie may differ
# there between any two processes. Prints each difference and a count.
#   bench/same_code.sh OLD_STITCH NEW_STITCH
set -uo pipefail
OLD=$1 NEW=$2
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export STITCH_CACHE_DIR=$(mktemp -d)
trap 'rm -rf "$STITCH_CACHE_DIR"' EXIT
same=0 differ=0
for f in "$ROOT"/examples/*.stitch "$ROOT"/bench/cpu/graphs/*.stitch \
         "$ROOT"/bench/torch/pieces/*.stitch "$ROOT"/bench/gpu/graphs/*.stitch; do
  dims=$(grep -E '^graph' "$f" | grep -oE '\[[^]]*\]' | tr -d '[] ' | tr ',' '\n' |
         grep -E '^[A-Za-z_][A-Za-z0-9_]*$' | sort -u | sed 's/.*/--dim &=64/' | tr '\n' ' ')
  for t in host sm_90 gfx90a; do
    for mode in "plan --format json" "codegen --emit source"; do
      # shellcheck disable=SC2086
      a=$("$OLD" $mode "$f" $dims --target $t 2>&1 | sed -E 's/[0-9a-f]{16}/H/g')
      # shellcheck disable=SC2086
      b=$("$NEW" $mode "$f" $dims --target $t 2>&1 | sed -E 's/[0-9a-f]{16}/H/g')
      if [[ "$a" == "$b" ]]; then same=$((same + 1)); else differ=$((differ + 1)); echo "differ: $f $t $mode"; fi
    done
  done
done
echo "same $same, differ $differ"
