#!/usr/bin/env bash
# sampling_cost.sh BUILD [MiB] [SECONDS] [THREADS]: what access sampling
# costs in a plain process.  sample_guest (two memfd regions of MiB in
# all, THREADS threads (default 1) touching 30 % of the pages per phase,
# back to back) runs under
# the real shim for SECONDS while memcanal-pager samples it every 500 ms:
# without sampling, at 1 %, at 10 %, and with a full pass every interval.
# One line per run: the load's pages touched per second; arming (the
# zap round trip: the pager's request, the shim's madvise, its answer)
# per interval and per page; MINOR fault service p50/p99 (read to
# UFFDIO_CONTINUE).  Run as root, holding /tmp/memcanal-guest.lock.
set -euo pipefail
build=$1 mib=${2:-1024} seconds=${3:-12} threads=${4:-1}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

run() {   # name, pager sampling options...
	local name=$1
	shift
	# The pager answers `samples` and `stats` before the load ends; it
	# exits when sample_guest does.
	(sleep $((seconds - 1)); echo samples; echo stats) |
		"$build/memcanal-pager" --socket "$dir/sock" \
			--store "file:$dir/pages" "$@" >"$dir/$name.pager" &
	sleep 0.2
	MEMCANAL_PAGER_SOCKET=$dir/sock \
		LD_PRELOAD=$build/libmemcanal-uffd.so \
		"$build/sample_guest" -m "$mib" -r 2 -t "$threads" -l "$seconds" \
		>"$dir/$name.load"
	wait
	python3 - "$name" "$dir/$name.pager" "$dir/$name.load" <<'EOF'
import json, statistics, sys
name, pager, load = sys.argv[1:]
events = {}
for line in open(pager):
    event = json.loads(line)
    events[event['event']] = event
rate = json.loads(open(load).readlines()[-1])
line = '%-8s %9.0f pages/s' % (name, rate['pages_per_s'])
zaps = [i for i in events['samples']['intervals'] if i['zapped']]
if zaps:
    ms = statistics.median(i['zap_ns'] for i in zaps) / 1e6
    per_page = statistics.median(i['zap_ns'] / i['zapped'] for i in zaps)
    s = events['stats']['sampling']
    line += ('  zapped %7d pages  arming %7.2f ms/interval %6.3f us/page'
             '  MINOR p50 %5.1f us p99 %5.1f us  (%d faults)' % (
                 statistics.median(i['zapped'] for i in zaps), ms,
                 per_page / 1e3, s['minor_p50_us'], s['minor_p99_us'],
                 s['minor_faults']))
print(line + ('' if rate['bad'] == 0 else '  WRONG WORDS %d' % rate['bad']))
EOF
}

run off
run 1% --sample-rate 0.01 --sample-interval-ms 500
run 10% --sample-rate 0.1 --sample-interval-ms 500
run full --sample-rate 0.01 --sample-interval-ms 500 --full-pass-every 1
