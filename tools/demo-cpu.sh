#!/bin/bash
# CPU per thread of whole `opdump demo --steps 20 --batch 8` runs, binaries interleaved: `perf
# record -e task-clock -F 4000` (a sample is 250 us of CPU), grouped into the runtime thread,
# the writer threads and any other thread; prints the median ms per group and binary. Readable under a
# load that makes step times useless (BENCHMARKS.md, "files linked into place from O_TMPFILE").
# usage: tools/demo-cpu.sh ROUNDS OUTDIR BIN...   (needs perf; the dump goes to OUTDIR/od-cpu)
R=$1; O=$2; shift 2
log=$(mktemp)
for i in $(seq 1 $R); do for b in "$@"; do
  rm -rf $O/od-cpu; perf record -q -F 4000 -e task-clock -o ${TMPDIR:-/tmp}/demo-cpu-$$.data $b demo --steps 20 --batch 8 --out $O/od-cpu >/dev/null 2>&1; rm -rf $O/od-cpu
  perf report -i ${TMPDIR:-/tmp}/demo-cpu-$$.data -n --sort comm 2>/dev/null | grep -v '^#' | grep '%' | awk -v b=$(basename $b) '{c=$3; n=$2; g=(c ~ /writer/)?"writers":(c ~ /pager/)?"pager":"runtime"; s[g]+=n} END{printf "%s %d %d %d\n", b, s["runtime"], s["writers"], s["pager"]}' >> $log
done; done
python3 - $log <<'PY'
import sys, statistics, collections
d=collections.OrderedDict()
for l in open(sys.argv[1]):
    b,r,w,p=l.split(); d.setdefault(b,[]).append((int(r),int(w),int(p)))
for b,v in d.items():
    med=lambda i: statistics.median(x[i] for x in v)*0.25
    print(f"{b:16s} n={len(v)} runtime thread {med(0):.0f} ms (runs {min(x[0] for x in v)*0.25:.0f}-{max(x[0] for x in v)*0.25:.0f}), writers {med(1):.0f} ms, pager {med(2):.0f} ms")
PY
rm -f $log ${TMPDIR:-/tmp}/demo-cpu-$$.data
