"""Run libCacheSim's exact and sampled LRU miss-ratio tools on a trace.

memcanal's benchmarks compare its own miss-ratio curves (MRCs) against a
well-known outside reference: libCacheSim.  Two of its C tools are used:

* ``distUtil`` computes the exact LRU stack distance of every reference
  (splay tree, O(log n) each), from which the exact LRU MRC follows.
* ``mrcProfiler`` in SHARDS mode (fixed sampling rate, LRU only) estimates
  the MRC from a hash-sampled subset of the objects.

Nothing of libCacheSim is vendored: :func:`build` downloads the pinned
source distribution from PyPI (``pip download --no-binary :all:``), finds
the C source tree inside it and builds only the two tools with cmake and
make into a cache directory (by default :data:`DEFAULT_WORK_DIR`).

Trace format: libCacheSim ``oracleGeneral``
-------------------------------------------
A flat file of packed little-endian 24-byte records, no header::

    uint32 clock_time         # seconds; ignored by both tools
    uint64 obj_id             # here: the guest page number
    uint32 obj_size           # bytes; here always 4096 (one page)
    int64  next_access_vtime  # see below

``next_access_vtime`` is what libCacheSim's own converter
(``traceConvOracleGeneral``) writes: the *1-based* position in the trace
of the next reference to the same object, i.e. ``j + 1`` when the next
reference is record ``j`` counting from 0; ``-1`` when the object is never
referenced again (the reader also accepts ``INT64_MAX`` for that, and
maps both to "never").  Neither tool used here reads the field (only
Belady-style oracle caches do), but our writer must produce the same
values so that the files stay valid for every libCacheSim tool.
memcanal's own writer, ``memcanal.estimation.traces.write`` (for a path
ending in ``.oracleGeneral``), does; the self-check uses it.

Records with ``obj_size == 0`` are skipped by libCacheSim's reader, so
never write them.  A plain (uncompressed) file is read through mmap; a
path ending in ``.zst`` is read as a zstd-compressed file instead (the
build enables zstd).  The trace type is given on the command line as
``oracleGeneral`` (``oracleGeneralBin`` is an alias).

Units
-----
All sizes in this module are numbers of objects (pages).  distUtil counts
objects: a stack distance is the number of *distinct other* objects
referenced since the previous reference to the same object.
mrcProfiler sizes its caches in bytes, weighting every object by its
``obj_size``; :func:`run_mrc_profiler_shards` converts pages to bytes
with the trace's object size, so all objects must have the same size.
"""

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np

from memcanal.estimation import traces
from memcanal.estimation import workloads

#: The libcachesim release whose sdist is built.  0.3.5 ships libCacheSim's
#: C tree under ``src/libCacheSim`` and builds cleanly on Debian 12.
LIBCACHESIM_VERSION = "0.3.5"

#: Suggested build cache; nothing under it is ever committed.
DEFAULT_WORK_DIR = Path("~/.cache/memcanal-bench/libcachesim").expanduser()

#: Debian packages needed to configure and build the two tools.  argp comes
#: with glibc; tcmalloc is optional and deliberately left out.
BUILD_DEPS = ("cmake", "make", "gcc", "g++", "pkg-config",
              "libglib2.0-dev", "libzstd-dev")

#: mrcProfiler refuses more cache sizes than this in one run
#: (MAX_MRC_PROFILE_POINTS in mrcProfiler.h).
MAX_SHARDS_SIZES = 128

#: Both tools copy their output path into a 128-byte buffer.
_MAX_OUTPUT_PATH = 127

#: Hash salt for SHARDS sampling; fixed so that runs are repeatable.
DEFAULT_SHARDS_SALT = 42

_TOOLS = ("distUtil", "mrcProfiler")


def _log(msg):
    """Progress goes to stderr so stdout stays free for results."""
    print("[libcachesim] %s" % msg, file=sys.stderr, flush=True)


def _run_logged(cmd, cwd=None):
    """Run a long build step, echoing its output line by line to stderr.

    Streaming (rather than capturing) shows progress such as make's
    percentages while the step runs; the last lines are kept so that a
    failure can be reported with its cause.
    """
    _log("$ " + " ".join(str(c) for c in cmd))
    tail = []
    with subprocess.Popen([str(c) for c in cmd], cwd=cwd,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, errors="replace") as proc:
        for line in proc.stdout:
            line = line.rstrip()
            print("    " + line, file=sys.stderr, flush=True)
            tail = (tail + [line])[-30:]
    if proc.returncode != 0:
        raise RuntimeError("command failed (exit %d): %s\n%s" % (
            proc.returncode, " ".join(str(c) for c in cmd), "\n".join(tail)))


def _missing_debs(packages):
    return [p for p in packages
            if subprocess.run(["dpkg", "-s", p], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL).returncode != 0]


def install_build_deps(packages=BUILD_DEPS):
    """Install the Debian build dependencies that are not installed yet.

    Only missing packages are installed, so a warm machine never touches
    apt.  When apt does not know a package (a fresh machine whose package
    lists were never fetched), ``apt-get update`` is run once and the
    install retried.
    """
    missing = _missing_debs(packages)
    if not missing:
        return []
    if shutil.which("apt-get") is None:
        raise RuntimeError("missing build dependencies and no apt-get: %s"
                           % " ".join(missing))
    sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
    apt = sudo + ["env", "DEBIAN_FRONTEND=noninteractive", "apt-get",
                  "-o", "DPkg::Lock::Timeout=600"]
    install = apt + ["install", "-y", "--no-install-recommends"] + missing
    _log("installing build dependencies: " + " ".join(missing))
    try:
        _run_logged(install)
    except RuntimeError:
        _log("apt-get install failed; running apt-get update and retrying")
        _run_logged(apt + ["update"])
        _run_logged(install)
    return missing


def _binary_paths(build_dir):
    return {t: build_dir / "bin" / t for t in _TOOLS}


def _have_binaries(paths):
    return all(p.is_file() and os.access(p, os.X_OK) for p in paths.values())


def _download_sdist(work_dir):
    name = "libcachesim-%s.tar.gz" % LIBCACHESIM_VERSION
    sdist = work_dir / name
    if not sdist.is_file():
        # pip (not a bare URL) so that the configured index and proxy apply.
        pip = [sys.executable, "-m", "pip"]
        if importlib.util.find_spec("pip") is None:  # e.g. a pip-less venv
            pip = [shutil.which("pip3") or "pip"]
        _run_logged(pip + ["download", "--no-deps", "--no-binary", ":all:",
                           "libcachesim==%s" % LIBCACHESIM_VERSION,
                           "-d", work_dir])
    if not sdist.is_file():
        raise RuntimeError("pip download did not produce %s" % sdist)
    return sdist


def _unpack(sdist, dest):
    if not dest.is_dir():
        _log("unpacking %s" % sdist.name)
        tmp = Path(tempfile.mkdtemp(prefix=".unpack-", dir=dest.parent))
        with tarfile.open(sdist) as tar:
            if hasattr(tarfile, "data_filter"):
                tar.extractall(tmp, filter="data")
            else:  # Python without PEP 706; the sdist comes from PyPI.
                tar.extractall(tmp)
        tmp.rename(dest)
    return dest


def _find_c_tree(root):
    """Return the directory holding libCacheSim's top CMakeLists.txt.

    The sdist's own top-level CMakeLists.txt builds the Python extension;
    the C project (``project(libCacheSim)``) is the directory three levels
    above ``libCacheSim/bin/distUtil``, wherever the sdist puts it.
    """
    for marker in sorted(root.rglob("bin/distUtil/CMakeLists.txt")):
        top = marker.parents[3]
        cmakelists = top / "CMakeLists.txt"
        if (cmakelists.is_file()
                and "project(libCacheSim)" in cmakelists.read_text()):
            return top
    raise RuntimeError("no libCacheSim C source tree found under %s" % root)


def build(work_dir=DEFAULT_WORK_DIR):
    """Build distUtil and mrcProfiler under ``work_dir``; return their paths.

    Idempotent: when both binaries already exist nothing is done.  The
    build is Release (the project's default, -O3), static library, tests
    off, and only the two targets are compiled, which takes well under a
    minute on two cores.
    """
    work_dir = Path(work_dir).expanduser().resolve()
    build_dir = work_dir / ("build-%s" % LIBCACHESIM_VERSION)
    paths = _binary_paths(build_dir)
    if _have_binaries(paths):
        return {k: str(v) for k, v in paths.items()}

    work_dir.mkdir(parents=True, exist_ok=True)
    install_build_deps()
    sdist = _download_sdist(work_dir)
    src = _unpack(sdist, work_dir / ("src-%s" % LIBCACHESIM_VERSION))
    c_tree = _find_c_tree(src)
    _log("configuring %s" % c_tree)
    _run_logged(["cmake", "-S", c_tree, "-B", build_dir,
                 "-DCMAKE_BUILD_TYPE=Release", "-DENABLE_TESTS=OFF",
                 "-DBUILD_SHARED_LIBS=OFF"])
    jobs = max(1, min(os.cpu_count() or 2, 2))
    _log("compiling %s (make -j%d)" % (" ".join(_TOOLS), jobs))
    _run_logged(["make", "-j%d" % jobs] + list(_TOOLS), cwd=build_dir)
    if not _have_binaries(paths):
        raise RuntimeError("build finished but binaries are missing in %s"
                           % build_dir)
    _log("built %s" % ", ".join(str(p) for p in paths.values()))
    return {k: str(v) for k, v in paths.items()}


def _short_tmpdir(prefix):
    """A scratch directory whose paths fit the tools' 128-byte buffers."""
    base = None
    if len(tempfile.gettempdir()) > 64 and os.path.isdir("/tmp"):
        base = "/tmp"
    return tempfile.mkdtemp(prefix=prefix, dir=base)


def _check_trace(trace_path):
    trace_path = Path(trace_path)
    if not trace_path.is_file():
        raise FileNotFoundError(trace_path)
    return str(trace_path)


def _timed(cmd):
    """Run one tool and return its wall time; raise with its stderr."""
    t0 = time.perf_counter()
    proc = subprocess.run([str(c) for c in cmd], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True,
                          errors="replace")
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError("%s failed (exit %d)\n%s%s" % (
            " ".join(str(c) for c in cmd), proc.returncode,
            proc.stdout[-2000:], proc.stderr[-2000:]))
    return seconds


def parse_stack_dist_cnt(text):
    """Parse distUtil's ``cntTxt`` histogram into (distances, counts).

    The file is one line of ``"dist:count, "`` items in hash-table order.
    A distance is the number of distinct other objects referenced since
    the previous reference to the same object (0 = immediate re-reference).
    First references (no reuse) are written with distance INT64_MAX
    (the tool maps its internal -1 to it); they are returned as -1.
    """
    dists, counts = [], []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        d, c = item.split(":")
        d = int(d)
        dists.append(-1 if d >= np.iinfo(np.int64).max or d < 0 else d)
        counts.append(int(c))
    dists = np.asarray(dists, dtype=np.int64)
    counts = np.asarray(counts, dtype=np.int64)
    order = np.argsort(dists, kind="stable")
    return dists[order], counts[order]


def mrc_from_stack_distances(dists, counts):
    """Exact LRU MRC from a stack-distance histogram.

    An LRU cache of C objects hits a reference iff its stack distance d
    (distinct *other* objects since the last reference) satisfies d < C,
    since the object then sits at depth d + 1 <= C.  First references
    (d = -1) miss at every size.  Returns sizes 1..max(d)+1, after which
    the curve is flat at the cold-miss ratio.
    """
    dists = np.asarray(dists, dtype=np.int64)
    counts = np.asarray(counts, dtype=np.int64)
    total = int(counts.sum())
    if total == 0:
        raise ValueError("empty trace")
    reuse = dists >= 0
    max_d = int(dists[reuse].max()) if reuse.any() else 0
    hist = np.bincount(dists[reuse], weights=counts[reuse],
                       minlength=max_d + 1)
    hits = np.cumsum(hist)  # hits[C - 1] = references with d < C
    sizes = np.arange(1, max_d + 2, dtype=np.int64)
    return sizes, 1.0 - hits / total


def curve_at(result, sizes):
    """Evaluate an exact step curve from :func:`run_distutil` at ``sizes``.

    Sizes below 1 give miss ratio 1; sizes beyond the largest distance
    give the final (cold-miss) ratio.
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    curve = np.asarray(result["miss_ratios"], dtype=np.float64)
    idx = np.clip(sizes, 1, len(curve)) - 1
    return np.where(sizes < 1, 1.0, curve[idx])


def _fix_first_object(trace, dists, counts):
    """Undo distUtil's one wrong cold miss (libCacheSim 0.3.5).

    distUtil keeps each object's last-access time as a GHashTable value
    and tests for "seen before" with ``g_hash_table_lookup() != NULL``;
    the very first reference has time 0, stored as a NULL pointer, so the
    first re-reference of the trace's first object is reported as a first
    reference (distance -1) instead of its real stack distance.  Every
    other reference is right, so the curve is off by exactly one
    reference at every size.  This finds that re-reference in the trace,
    computes its distance (distinct pages strictly between the two
    references) and moves the count.  The fix is applied only when the
    cold-miss count exceeds the number of distinct pages by exactly one,
    so a libCacheSim that fixes the bug is left alone.  It runs outside
    the timed subprocess.
    """
    ids = traces.read(trace, "oracleGeneral").pages
    cold = int(counts[dists == -1].sum())
    n_distinct = len(np.unique(ids))
    if cold == n_distinct:
        return dists, counts
    later = np.flatnonzero(ids[1:] == ids[0])
    if cold != n_distinct + 1 or len(later) == 0:
        raise RuntimeError("distUtil reported %d first references for %d "
                           "distinct objects" % (cold, n_distinct))
    j = int(later[0]) + 1
    d = len(np.unique(ids[1:j]))
    dists = np.append(dists, d)
    counts = np.append(counts, 1)
    counts[np.flatnonzero(dists == -1)[0]] -= 1
    order = np.argsort(dists, kind="stable")
    return dists[order], counts[order]


def run_distutil(binaries, trace_path, fix_first_object=True):
    """Exact LRU MRC of an oracleGeneral trace via distUtil.

    Command: ``distUtil TRACE oracleGeneral stack_dist cntTxt OUT``, which
    writes the histogram to ``OUT.STACK_DIST.cnt``.  The histogram form
    (rather than ``binary``, 4 bytes per reference) keeps the output
    small for long traces; it is counted in C in negligible time.
    With ``fix_first_object`` (needs an uncompressed trace) the one
    reference distUtil gets wrong is corrected, see
    :func:`_fix_first_object`; without it the curve is 1/n_req too high.

    Returns ``seconds`` (wall time of the subprocess, including reading
    the trace and writing the histogram), ``sizes`` (1..max distance + 1,
    in objects), ``miss_ratios``, ``n_req`` and ``command``.
    """
    trace = _check_trace(trace_path)
    tmp = _short_tmpdir("lcs-dist-")
    try:
        out = os.path.join(tmp, "d")
        if len(out) > _MAX_OUTPUT_PATH:
            raise RuntimeError("scratch path too long for distUtil")
        cmd = [binaries["distUtil"], trace, "oracleGeneral", "stack_dist",
               "cntTxt", out]
        seconds = _timed(cmd)
        with open(out + ".STACK_DIST.cnt") as f:
            dists, counts = parse_stack_dist_cnt(f.read())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if fix_first_object and not trace.endswith(".zst"):
        dists, counts = _fix_first_object(trace, dists, counts)
    sizes, miss_ratios = mrc_from_stack_distances(dists, counts)
    return {"seconds": seconds, "sizes": sizes, "miss_ratios": miss_ratios,
            "n_req": int(counts.sum()), "command": cmd}


def _trace_obj_size(trace_path):
    if str(trace_path).endswith(".zst"):
        raise ValueError("pass obj_size explicitly for a .zst trace")
    rec = np.fromfile(trace_path, dtype=traces.ORACLE_GENERAL_DTYPE, count=1)
    if len(rec) == 0:
        raise ValueError("empty trace %s" % trace_path)
    return int(rec["obj_size"][0])


def parse_mrc_profiler_output(text):
    """Parse mrcProfiler's result table into (bytes, miss_ratios).

    After a few ``key: value`` lines comes the header
    ``cache_size<TAB>miss_rate<TAB>byte_miss_rate`` (preceded by
    ``wss_ratio`` when sizes were given as working-set fractions, which
    this module never does), then one row per size, e.g.
    ``409600B<TAB>0.512345<TAB>0.512345``.  Ratios have 6 decimals and are
    clipped to [0, 1] by the tool.  ``miss_rate`` (per request) is used.
    """
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("cache_size\t") or line.startswith("wss_ratio\t"):
            header = line.split("\t")
            rows = [r.split("\t") for r in lines[i + 1:] if r.strip()]
            break
    else:
        raise ValueError("no MRC table in mrcProfiler output:\n" + text)
    size_col = header.index("cache_size")
    mr_col = header.index("miss_rate")
    sizes = np.array([int(r[size_col].rstrip("B")) for r in rows],
                     dtype=np.int64)
    mrs = np.array([float(r[mr_col]) for r in rows], dtype=np.float64)
    return sizes, mrs


def run_mrc_profiler_shards(binaries, trace_path, rate, sizes,
                            salt=DEFAULT_SHARDS_SALT, obj_size=None):
    """SHARDS (fixed-rate, LRU) MRC of an oracleGeneral trace.

    ``sizes`` are cache sizes in objects (pages); they are sorted and
    de-duplicated, and at most :data:`MAX_SHARDS_SIZES` are allowed per
    run.  mrcProfiler sizes caches in bytes weighted by each object's
    ``obj_size`` (read from the first record unless given), so a size of
    n pages is passed as ``n * obj_size / 1024`` with a ``K`` suffix.  The
    suffix matters: a bare integer list such as ``4096,8192`` is taken
    for working-set fractions (any size made of digits and dots is), and
    ``KiB``/``GiB`` suffixes are silently parsed as plain bytes; only
    ``K``/``KB``/``M``/``MB``/``G``/``GB`` scale.

    SHARDS weights an object by its size including itself, so with rate 1
    a reference hits at n pages iff it would in an exact LRU of n pages;
    with rate r each sampled distance is scaled by 1/r.  The tool also
    adds the expected-minus-sampled reference count to the hits of the
    smallest size (SHARDS-adj), which makes that first point noisier.

    Returns ``seconds``, ``sizes`` (objects), ``miss_ratios``, ``command``.
    """
    trace = _check_trace(trace_path)
    if not 0 < rate <= 1:
        raise ValueError("rate must be in (0, 1]")
    sizes = np.unique(np.asarray(sizes, dtype=np.int64))
    if len(sizes) == 0 or sizes[0] < 1:
        raise ValueError("sizes must be positive object counts")
    if len(sizes) > MAX_SHARDS_SIZES:
        raise ValueError("mrcProfiler takes at most %d sizes, got %d"
                         % (MAX_SHARDS_SIZES, len(sizes)))
    if obj_size is None:
        obj_size = _trace_obj_size(trace)
    size_bytes = sizes * int(obj_size)
    if np.any(size_bytes % 1024):
        raise ValueError("cache sizes of %d-byte objects are not whole KiB"
                         % obj_size)
    size_arg = ",".join("%dK" % (b // 1024) for b in size_bytes)
    tmp = _short_tmpdir("lcs-mrc-")
    try:
        out = os.path.join(tmp, "mrc.txt")
        cmd = [binaries["mrcProfiler"], trace, "oracleGeneral",
               "--algo=LRU", "--profiler=SHARDS",
               "--profiler-params=FIX_RATE,%r,%d" % (float(rate), salt),
               "--size=" + size_arg, "--output=" + out]
        if len(out) > _MAX_OUTPUT_PATH:
            raise RuntimeError("scratch path too long for mrcProfiler")
        seconds = _timed(cmd)
        with open(out) as f:
            out_bytes, miss_ratios = parse_mrc_profiler_output(f.read())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if not np.array_equal(out_bytes, size_bytes):
        raise RuntimeError("mrcProfiler reported other sizes than asked: %s"
                           % out_bytes[:5])
    return {"seconds": seconds, "sizes": sizes, "miss_ratios": miss_ratios,
            "command": cmd}


def brute_force_lru_mrc(obj_ids):
    """Exact LRU MRC by simulating one LRU stack in plain Python.

    Deliberately naive and independent of libCacheSim (a list kept in
    recency order, most recent first), to check distUtil's parsing.
    Returns the miss ratio for sizes 1..number of distinct objects.
    """
    stack = []
    hist = {}
    for x in obj_ids.tolist():
        try:
            d = stack.index(x)
        except ValueError:
            d = -1
        else:
            del stack[d]
        stack.insert(0, x)
        hist[d] = hist.get(d, 0) + 1
    n = len(obj_ids)
    hits = np.zeros(len(stack) + 1, dtype=np.int64)
    for d, c in hist.items():
        if d >= 0:
            hits[d + 1] += c  # hit for every size > d
    return 1.0 - np.cumsum(hits)[1:] / n


def _self_check(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work-dir", default=str(DEFAULT_WORK_DIR))
    parser.add_argument("--refs", type=int, default=200_000)
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--alpha", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rate", type=float, default=0.1,
                        help="SHARDS sampling rate (0.1 suits 10k objects)")
    parser.add_argument("--no-brute-force", action="store_true",
                        help="skip the Python LRU check (for big traces)")
    parser.add_argument("--trace", help="keep the trace at this path")
    args = parser.parse_args(argv)

    binaries = build(args.work_dir)
    tmp = tempfile.mkdtemp(prefix="lcs-check-")
    try:
        trace = args.trace or os.path.join(tmp, "zipf.oracleGeneral")
        ids = workloads.zipf_pages(args.refs, args.objects, args.alpha,
                                   np.random.default_rng(args.seed))
        traces.write(traces.Trace.of(ids), trace, "oracleGeneral")
        n_distinct = len(np.unique(ids))
        print("trace: %d refs, %d distinct pages, Zipf alpha %.2f"
              % (len(ids), n_distinct, args.alpha))

        exact = run_distutil(binaries, trace)
        print("distUtil: %.3f s, %.2f M refs/s   %s" % (
            exact["seconds"], len(ids) / exact["seconds"] / 1e6,
            " ".join(exact["command"])))
        assert exact["n_req"] == len(ids), exact["n_req"]

        sizes = np.unique(np.linspace(0.01, 1.0, 100) * args.objects
                          ).round().astype(np.int64)
        shards = run_mrc_profiler_shards(binaries, trace, args.rate, sizes)
        print("SHARDS %g: %.3f s, %.2f M refs/s   %s" % (
            args.rate, shards["seconds"],
            len(ids) / shards["seconds"] / 1e6,
            " ".join(shards["command"])))

        ok = True
        want = curve_at(exact, shards["sizes"])
        if not args.no_brute_force:
            t0 = time.perf_counter()
            brute = brute_force_lru_mrc(ids)
            print("python brute force: %.1f s" % (time.perf_counter() - t0))
            full = curve_at(exact, np.arange(1, len(brute) + 1))
            diff = float(np.max(np.abs(full - brute)))
            print("distUtil vs brute force, all %d sizes: max |diff| = %g"
                  % (len(brute), diff))
            ok = diff == 0.0
            print("%8s %10s %10s %10s" % ("pages", "brute", "distUtil",
                                          "SHARDS"))
            for s, m in zip(shards["sizes"][::10],
                            shards["miss_ratios"][::10]):
                print("%8d %10.6f %10.6f %10.6f" % (
                    s, brute[min(s, len(brute)) - 1], curve_at(exact, [s])[0],
                    m))
        mae = float(np.mean(np.abs(shards["miss_ratios"] - want)))
        print("SHARDS %g vs exact at %d sizes: MAE %.5f, max %.5f" % (
            args.rate, len(want), mae,
            float(np.max(np.abs(shards["miss_ratios"] - want)))))
        print("OK" if ok else "MISMATCH")
        return 0 if ok else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(_self_check())
