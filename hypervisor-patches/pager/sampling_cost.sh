#!/usr/bin/env bash
# What access sampling costs, under the real shim, sampled every 500 ms:
# without sampling, at 1 %, at 10 %, and with a full pass every interval.
#
#   sampling_cost.sh BUILD process [MiB] [SECONDS] [THREADS]
#       sample_guest: two memfd regions of MiB in all (default 1024),
#       THREADS (1) threads touching 30 % of the pages per phase, back
#       to back, for SECONDS (12); its load: pages touched per second.
#   sampling_cost.sh BUILD guest GUEST_DIR [SECONDS]
#       the test guest (tools/build-test-guest.sh: QEMU TCG, 256 MiB in
#       a memfd) running wsswork RRWW over 64 MiB, SECONDS (8) a phase;
#       its load: wsswork's read and write phases, ops per microsecond.
#
# One line per run: the load; arming (the zap's round trip: the pager's
# request, QEMU's madvise, its answer) per interval and per page zapped;
# MINOR fault service p50/p99 (reading the fault to UFFDIO_CONTINUE);
# all from the pager's counters when its process exits.  Run as root,
# holding /tmp/memcanal-guest.lock.
set -euo pipefail
build=$1 mode=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

process_load() {
	"${shim[@]}" "$build/sample_guest" -m "${1:-1024}" -r 2 -t "${3:-1}" \
		-l "${2:-12}" | tail -1
}

guest_load() {
	local log=$dir/console
	"${shim[@]}" qemu-system-x86_64 -machine q35 -accel tcg -m 256 -smp 1 \
		-kernel "$1/vmlinux" -initrd "$1/initramfs.gz" \
		-append "console=ttyS0 panic=-1 memcanal.workload=RRWW:64:${2:-8}" \
		-display none -monitor none -serial "file:$log" -no-reboot \
		-object memory-backend-memfd,id=mem,size=256M,share=on \
		-machine memory-backend=mem
	grep -a 'wsswork: phase=.. passes' "$log" |
		sed 's/.*phase=\(..\).*ops_per_us=\([0-9.]*\).*/\1 \2/' |
		tr '\n' ' '
}

run() {   # name, pager sampling options...
	local name=$1
	shift
	# The pager serves until the load's process exits, then prints its
	# counters.
	"$build/memcanal-pager" --socket "$dir/sock" --store "file:$dir/pages" \
		"$@" </dev/null >"$dir/pager" &
	sleep 0.2
	load=$("${mode}_load" "${args[@]}")
	wait
	python3 - "$name" "$load" "$dir/pager" <<'EOF'
import json, sys
name, load, pager = sys.argv[1:]
out = [json.loads(line) for line in open(pager)]
stats = [e for e in out if e['event'] == 'exit'][0]
s = stats['sampling']
line = '%-5s %-40s' % (name, load.strip())
if s['enabled']:
    zapped = stats['pages'] if s['full_pass_every'] == 1 else s['sampled_pages']
    per = s['zap_ns'] / s['zap_requests']
    line += (' zap %7d pages %6.2f ms %6.3f us/page  MINOR p50 %5.1f us'
             ' p99 %6.1f us (%d)' % (zapped, per / 1e6, per / zapped / 1e3,
                                     s['minor_p50_us'], s['minor_p99_us'],
                                     s['minor_faults']))
print(line)
EOF
}

args=("${@:3}")
shim=(env "MEMCANAL_PAGER_SOCKET=$dir/sock"
      "LD_PRELOAD=$build/libmemcanal-uffd.so")
run off
run 1% --sample-rate 0.01 --sample-interval-ms 500
run 10% --sample-rate 0.1 --sample-interval-ms 500
run full --sample-rate 0.01 --sample-interval-ms 500 --full-pass-every 1
