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
# request, QEMU's madvise, its answer) p50 and p99 over the intervals,
# and p50 per page zapped;
# MINOR fault service p50/p99 (reading the fault to UFFDIO_CONTINUE);
# all from the pager's counters when its process exits.  Run as root,
# holding /tmp/memcanal-guest.lock.
set -euo pipefail
build=$1 mode=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

process_load() {
	"${shim[@]}" "$build/sample_guest" -m "${1:-1024}" -r 2 -t "${3:-1}" \
		-l "${2:-12}" | tail -1 |
		sed 's/.*"pages_per_s": \([0-9]*\), "bad": \([0-9]*\).*/\1 pages\/s bad \2/'
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
line = '%-5s %-22s' % (name, load.strip())
if s['enabled']:
    full = s['full_pass_every'] == 1
    kind, zapped = ('full_zap', stats['pages']) if full else (
        'zap', s['sampled_pages'])
    p50, p99 = s[kind + '_p50_us'], s[kind + '_p99_us']
    line += (' zap %6d pages p50 %6.2f ms (%5.3f us/page) p99 %6.2f ms'
             '  MINOR p50 %4.1f us p99 %5.1f us (%d)' % (
                 zapped, p50 / 1e3, p50 / zapped, p99 / 1e3,
                 s['minor_p50_us'], s['minor_p99_us'], s['minor_faults']))
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
