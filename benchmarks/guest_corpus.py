"""Ordinary programs for the test guest, beside wsswork's loops: what
benchmarks/sampling_accuracy.py runs with --workload NAME.

Busybox's programs on files in the guest's tmpfs (its own RAM: the
files' page cache is working set too), each a shell line for
sampled_guest's /init. Under TCG and memtrace the guest runs about a
hundredth of native speed, so inputs are a few MiB: working sets from a
few hundred pages a second (hashing a small file, awk on a short text)
to tens of thousands (sorting and compressing 16 to 48 MiB), steady
(one program over and over) and phased (small, large, small).
"""

# Input files, made in the guest (busybox seq/awk/dd): a numeric table,
# a text of words, random bytes.
_TABLE = ("seq 1 %d | awk '{print ($1 * 7919) %% 1000003, $1, "
          "$1 %% 97}' > /tmp/table")
_TEXT = ("awk 'BEGIN {srand(7); for (i = 0; i < %d; i++) {line = \"\"; "
         "for (j = 0; j < 12; j++) line = line \" w\" int(rand() * 5000); "
         "print line}}' > /tmp/text")
_RANDOM = 'dd if=/dev/urandom of=/tmp/random bs=1024 count=%d 2>/dev/null'


def _repeat(times, command):
    return 'for i in $(seq %d); do %s; done' % (times, command)


WORKLOADS = {
    # Hashing a 2 MiB file: a small, steady working set (~600 pages).
    'md5sum-small': '%s; %s' % (
        _RANDOM % 2048, _repeat(60, 'md5sum /tmp/random > /dev/null')),
    # sha256sum over 24 MiB: a large steady working set.
    'sha256sum-large': '%s; %s' % (
        _RANDOM % 24576, _repeat(8, 'sha256sum /tmp/random > /dev/null')),
    # Numeric sort of 150,000 lines, over and over (~4 MiB in, sort's
    # buffers besides).
    'sort': '%s; %s' % (
        _TABLE % 150000, _repeat(6, 'sort -n /tmp/table > /tmp/sorted')),
    # gzip then gunzip | md5sum of 8 MiB of random bytes.
    'gzip': '%s; %s' % (
        _RANDOM % 8192, _repeat(4, 'gzip -c /tmp/random > /tmp/random.gz; '
                                'gunzip -c /tmp/random.gz | md5sum')),
    # Text processing: word counts with awk, substitutions with sed.
    'awk-sed': '%s; %s' % (
        _TEXT % 20000, _repeat(6, "awk '{for (i = 1; i <= NF; i++) "
                               "n[$i]++} END {for (w in n) print n[w], w}' "
                               "/tmp/text | sort -rn | head -3; "
                               "sed 's/w1/x/g; s/w2/y/g' /tmp/text | wc -c")),
    # Phased: hashing a small file, sorting a large table, hashing again.
    'phased': '%s; %s; %s; %s; %s' % (
        _RANDOM % 1024, _TABLE % 300000,
        _repeat(20, 'md5sum /tmp/random > /dev/null'),
        _repeat(2, 'sort -n /tmp/table > /tmp/sorted'),
        _repeat(20, 'md5sum /tmp/random > /dev/null')),
}
