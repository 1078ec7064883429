#!/bin/bash
# Interleaved rounds of `opdump demo` between two builds (BENCHMARKS.md, "Digests on the writer
# threads"): in each round, BEFORE, then AFTER, then AFTER with OPDUMP_WRITER_NICE=0, each a
# fresh process dumping into a fresh directory under $OUTBASE (default /tmp), removed after the
# run. Prints one line per run: round, variant, the demo's median dumped step (ms), median
# undumped step (ms), their ratio, the 1-minute load average, the wall time incl. flush (s);
# then the medians per variant.
#
# usage: tools/demo-rounds.sh BEFORE_BIN AFTER_BIN ROUNDS STEPS BATCH [demo args...]
# e.g.   (a release build of the older commit copied to /tmp/opdump-before)
#        tools/demo-rounds.sh /tmp/opdump-before target/release/opdump 11 3 8
set -eu
BEFORE=$1; AFTER=$2; R=$3; S=$4; B=$5; shift 5
log=$(mktemp)
for i in $(seq 1 "$R"); do
  for v in before after after0; do
    out=${OUTBASE:-/tmp}/opdump-demo-rounds-$$-$v
    rm -rf "$out"
    bin=$AFTER; [ "$v" = before ] && bin=$BEFORE
    if [ "$v" = after0 ]; then export OPDUMP_WRITER_NICE=0; else unset OPDUMP_WRITER_NICE; fi
    res=$("$bin" demo --steps "$S" --batch "$B" --out "$out" "$@" 2>&1)
    line=$(echo "$res" | grep "median step time")
    wall=$(echo "$res" | grep -o "in [0-9.]* s" | cut -d' ' -f2)
    d=$(echo "$line" | sed -E 's/.*time: ([0-9.]+) ms with dump vs ([0-9.]+) ms without \(([0-9.]+)x\).*/\1 \2 \3/')
    echo "$i $v $d $(cut -d' ' -f1 /proc/loadavg) $wall" | tee -a "$log"
    rm -rf "$out"
  done
done
unset OPDUMP_WRITER_NICE
python3 - "$log" <<'PY'
import sys, statistics, collections
d = collections.defaultdict(lambda: collections.defaultdict(list))
for line in open(sys.argv[1]):
    p = line.split()
    if len(p) < 7:
        continue
    for k, x in zip(["dumped", "undumped", "ratio", "load", "wall"], p[2:7]):
        d[p[1]][k].append(float(x))
for v, m in d.items():
    print(f"{v:7s} n={len(m['ratio'])} dumped {statistics.median(m['dumped']):.2f} ms, "
          f"undumped {statistics.median(m['undumped']):.2f} ms, ratio {statistics.median(m['ratio']):.2f}x "
          f"({min(m['ratio']):.2f}-{max(m['ratio']):.2f}), load {min(m['load']):.1f}-{max(m['load']):.1f}, "
          f"wall {statistics.median(m['wall']):.2f} s")
PY
rm -f "$log"
