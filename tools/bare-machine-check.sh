#!/usr/bin/env bash
# The README's two commands on a machine with nothing but a Rust toolchain, as a new user
# runs them (issue 21, item 8): a Debian 12 minimal root (mmdebstrap, variant minbase, plus
# gcc and libc6-dev for the linker rustup needs, git, curl and ca-certificates; no python3,
# numpy, protoc, g++, chromium or ONNX Runtime), rustup's default stable toolchain installed
# inside it, a fresh `git clone` of this repository, then
#   cargo xtask test                                          (the tests)
#   cargo run --release -p opdump --no-default-features -- demo (the main job)
# Each must exit 0; the run prints the test totals and the list of what could not run.
#
# Usage (as root, on a Debian/Ubuntu host with network access to deb.debian.org,
# static.rust-lang.org and crates.io):  bash tools/bare-machine-check.sh [ROOT_DIR]
# ROOT_DIR (default /tmp/opdump-bare) is created, used and its build outputs deleted.
# The host's extra CA certificates (/usr/local/share/ca-certificates) are copied in, for
# networks behind a TLS proxy. Takes about 70 minutes on a loaded 2-core machine.
set -euo pipefail
root=${1:-/tmp/opdump-bare}
repo=$(cd "$(dirname "$0")/.." && pwd)
[ "$(id -u)" = 0 ] || { echo "run as root (mmdebstrap and chroot)" >&2; exit 2; }
command -v mmdebstrap >/dev/null || apt-get install -y -qq mmdebstrap
if [ ! -x "$root/usr/bin/gcc" ]; then
  mmdebstrap --variant=minbase --include=ca-certificates,curl,git,gcc,libc6-dev \
    bookworm "$root" http://deb.debian.org/debian
fi
cp -a /usr/local/share/ca-certificates/. "$root/usr/local/share/ca-certificates/" 2>/dev/null || true
chroot "$root" update-ca-certificates >/dev/null
cp /etc/resolv.conf "$root/etc/resolv.conf"
mkdir -p "$root/src"
mount --bind "$repo" "$root/src"
mount -o remount,bind,ro "$root/src"
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
mount --rbind /sys "$root/sys"
trap 'umount -l "$root/src" "$root/proc" "$root/dev" "$root/sys" 2>/dev/null || true' EXIT
cat > "$root/root/bare.sh" <<'INNER'
set -u
cd /root
curl -sSfo rustup-init https://static.rust-lang.org/rustup/dist/x86_64-unknown-linux-gnu/rustup-init
chmod +x rustup-init && ./rustup-init -y >/root/rustup.log 2>&1 || { tail rustup.log; exit 1; }
. /root/.cargo/env
rustc --version
for t in protoc python3 chromium g++; do command -v $t >/dev/null && echo "has $t" || echo "no $t"; done
rm -rf opdump && git clone -q /src opdump && cd opdump && git log --oneline -1
start=$(date +%s)
cargo xtask test > /root/test.log 2>&1; rc=$?
echo "cargo xtask test: rc=$rc in $(( $(date +%s) - start )) s"
sed -n '/=== what could not run here/,$p' /root/test.log
start=$(date +%s)
cargo run --release -p opdump --no-default-features -- demo > /root/demo.log 2>&1; drc=$?
echo "demo: rc=$drc in $(( $(date +%s) - start )) s"; tail -3 /root/demo.log
rm -rf /root/opdump/target
[ $rc = 0 ] && [ $drc = 0 ]
INNER
chroot "$root" env -i HOME=/root TERM=dumb \
  PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin bash /root/bare.sh
