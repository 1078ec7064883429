#!/bin/bash
# Interleaved rounds of `opdump demo` for any number of binaries or wrapper scripts (same parsing
# and output as tools/demo-rounds.sh, without its nice-0 variant); OUTBASE picks the file system
# (default /tmp). A wrapper script sets a switch, e.g.
#   printf '#!/bin/sh\nOPDUMP_NAMED_TEMPORARIES=1 exec target/release/opdump "$@"\n' > /tmp/opdump-named
# usage: tools/demo-rounds-n.sh ROUNDS STEPS BATCH BIN...
# FRESH=1 writes every run into a directory of its own and deletes them all after the last
# round, as a first run into a new directory is: on ext4 without a journal, files created
# within a minute of deleting others walk the deleted inodes (BENCHMARKS.md), which the
# default (delete after every run) makes every run but the first pay.
set -eu
R=$1; S=$2; B=$3; shift 3
log=$(mktemp)
for i in $(seq 1 "$R"); do
  for bin in "$@"; do
    out=${OUTBASE:-/tmp}/opdump-rounds-n-$$
    if [ "${FRESH:-0}" = 1 ]; then out=$out-$i-$(basename "$bin"); fi
    rm -rf "$out"
    res=$("$bin" demo --steps "$S" --batch "$B" --out "$out" 2>&1)
    line=$(echo "$res" | grep "median step time")
    wall=$(echo "$res" | grep -o "in [0-9.]* s" | cut -d' ' -f2)
    d=$(echo "$line" | sed -E 's/.*time: ([0-9.]+) ms with dump vs ([0-9.]+) ms without \(([0-9.]+)x\).*/\1 \2 \3/')
    echo "$i $(basename $bin) $d $(cut -d' ' -f1 /proc/loadavg) $wall" >> "$log"
    if [ "${FRESH:-0}" != 1 ]; then rm -rf "$out"; fi
  done
done
if [ "${FRESH:-0}" = 1 ]; then rm -rf "${OUTBASE:-/tmp}"/opdump-rounds-n-$$-*; fi
python3 - "$log" <<'PY'
import sys, statistics, collections
d = collections.OrderedDict()
for line in open(sys.argv[1]):
    p = line.split()
    if len(p) < 7: continue
    m = d.setdefault(p[1], collections.defaultdict(list))
    for k, x in zip(["dumped", "undumped", "ratio", "load", "wall"], p[2:7]):
        m[k].append(float(x))
for v, m in d.items():
    print(f"{v:16s} n={len(m['ratio'])} dumped {statistics.median(m['dumped']):.2f} ms, "
          f"undumped {statistics.median(m['undumped']):.2f} ms, ratio {statistics.median(m['ratio']):.2f}x "
          f"({min(m['ratio']):.2f}-{max(m['ratio']):.2f}), load {min(m['load']):.1f}-{max(m['load']):.1f}, "
          f"wall {statistics.median(m['wall']):.2f} s")
PY
rm -f "$log"
