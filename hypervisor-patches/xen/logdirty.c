/*
 * memcanal-logdirty: a Xen guest's written frames, per interval, from
 * the hypervisor's log-dirty bitmap (what PML fills on Intel hosts).
 *
 *   memcanal-logdirty DOMID INTERVAL_S COUNT
 *
 * Runs in dom0. Log-dirty is turned on for DOMID, then every INTERVAL_S
 * seconds the bitmap is read and cleared in one hypercall (CLEAN: a PEEK
 * and a reset) and one JSON line is printed:
 *   {"interval": i, "start_ns": .., "end_ns": .., "dirty": n,
 *    "pfns": [[first, count], ...], "cost_ns": .., "pages": ..}
 * start_ns and end_ns are CLOCK_MONOTONIC times of the two cleans that
 * bound the interval; pfns are the dirty frames as runs; cost_ns is the
 * clean hypercall plus the bitmap's scan; pages is the bitmap's size in
 * frames (the domain's highest frame + 1). COUNT 0 runs until signalled.
 * Log-dirty is turned off on exit, SIGTERM and SIGINT: left on, it would
 * keep the guest's every first write per round trapping into Xen.
 *
 * Xen 4.17's PV guests need a Xen built with CONFIG_SHADOW_PAGING for
 * log-dirty (Debian's is not: EOPNOTSUPP); PVH and HVM guests use HAP.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <xenctrl.h>

#define BITS_PER_WORD (8 * sizeof(unsigned long))

static volatile sig_atomic_t stopping;

static void on_signal(int signo)
{
    (void)signo;
    stopping = 1;
}

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

/* Sleep until ``deadline`` (CLOCK_MONOTONIC ns); early on a signal, so a
 * SIGTERM turns log-dirty off at once rather than an interval later. */
static void sleep_until(uint64_t deadline)
{
    struct timespec ts = {
        .tv_sec = deadline / 1000000000ULL,
        .tv_nsec = deadline % 1000000000ULL,
    };

    while (!stopping && clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME,
                                        &ts, NULL) == EINTR)
        ;
}

struct runs {
    uint64_t (*pairs)[2];   /* [first pfn, count] */
    size_t used, size;
};

/* Append the run [first, count] to ``runs``; false when out of memory. */
static int add_run(struct runs *runs, uint64_t first, uint64_t count)
{
    if (runs->used == runs->size) {
        size_t size = runs->size ? 2 * runs->size : 1024;
        void *pairs = realloc(runs->pairs, size * sizeof(*runs->pairs));

        if (!pairs)
            return 0;
        runs->pairs = pairs;
        runs->size = size;
    }
    runs->pairs[runs->used][0] = first;
    runs->pairs[runs->used][1] = count;
    runs->used++;
    return 1;
}

/* The set bits of ``bitmap`` (``pages`` bits) as runs; how many bits
 * were set, or -1. Zero words are skipped whole: most of a guest is
 * clean in most intervals. */
static int64_t scan(const unsigned long *bitmap, unsigned long pages,
                    struct runs *runs)
{
    uint64_t dirty = 0, first = 0, run = 0;
    unsigned long pfn, words = (pages + BITS_PER_WORD - 1) / BITS_PER_WORD;

    runs->used = 0;
    for (unsigned long w = 0; w < words; w++) {
        if (!bitmap[w] && !run)
            continue;
        for (unsigned int b = 0; b < BITS_PER_WORD; b++) {
            pfn = w * BITS_PER_WORD + b;
            if (pfn < pages && (bitmap[w] >> b) & 1) {
                if (!run)
                    first = pfn;
                run++;
            } else if (run) {
                if (!add_run(runs, first, run))
                    return -1;
                dirty += run;
                run = 0;
            }
        }
    }
    if (run) {
        if (!add_run(runs, first, run))
            return -1;
        dirty += run;
    }
    return dirty;
}

/* One interval: clean, scan, one line. cost_ns is the clean and the
 * scan, what a collector pays whatever it does with the frames. */
static int clean_and_report(xc_interface *xch, uint32_t domid,
                            xc_hypercall_buffer_t *buffer,
                            unsigned long *bitmap, unsigned long pages,
                            unsigned int interval, uint64_t start,
                            struct runs *runs)
{
    uint64_t end = now_ns(), cost;
    int64_t dirty;
    long long ret;

    ret = xc_logdirty_control(xch, domid, XEN_DOMCTL_SHADOW_OP_CLEAN,
                              buffer, pages, 0, NULL);
    if (ret < 0) {
        fprintf(stderr, "memcanal-logdirty: clean: %s\n", strerror(errno));
        return -1;
    }
    dirty = scan(bitmap, pages, runs);
    cost = now_ns() - end;
    if (dirty < 0) {
        fprintf(stderr, "memcanal-logdirty: out of memory\n");
        return -1;
    }
    printf("{\"interval\": %u, \"start_ns\": %" PRIu64 ", \"end_ns\": %"
           PRIu64 ", \"dirty\": %" PRId64 ", \"pfns\": [", interval, start,
           end, dirty);
    for (size_t i = 0; i < runs->used; i++)
        printf("%s[%" PRIu64 ", %" PRIu64 "]", i ? ", " : "",
               runs->pairs[i][0], runs->pairs[i][1]);
    printf("], \"cost_ns\": %" PRIu64 ", \"pages\": %lu}\n", cost, pages);
    fflush(stdout);
    return 0;
}

static int run(xc_interface *xch, uint32_t domid, double interval_s,
               unsigned long count)
{
    DECLARE_HYPERCALL_BUFFER(unsigned long, bitmap);
    struct runs runs = { 0 };
    xen_pfn_t max_gpfn;
    unsigned long pages, nr_pages, interval;
    uint64_t start, step = (uint64_t)(interval_s * 1e9);
    int rc = 1;

    if (xc_domain_maximum_gpfn(xch, domid, &max_gpfn) < 0) {
        fprintf(stderr, "memcanal-logdirty: domain %u: %s\n", domid,
                strerror(errno));
        return 1;
    }
    pages = max_gpfn + 1;
    /* One bit a frame, in whole pages. */
    nr_pages = (pages + 8 * XC_PAGE_SIZE - 1) / (8 * XC_PAGE_SIZE);
    bitmap = xc_hypercall_buffer_alloc_pages(xch, bitmap, nr_pages);
    if (!bitmap) {
        fprintf(stderr, "memcanal-logdirty: bitmap of %lu pages\n", pages);
        return 1;
    }
    if (xc_shadow_control(xch, domid, XEN_DOMCTL_SHADOW_OP_ENABLE_LOGDIRTY,
                          NULL, 0) < 0) {
        fprintf(stderr, "memcanal-logdirty: enable: %s\n", strerror(errno));
        goto out;
    }
    start = now_ns();
    for (interval = 0; !count || interval < count; interval++) {
        sleep_until(start + step);
        if (stopping)
            break;
        if (clean_and_report(xch, domid, HYPERCALL_BUFFER(bitmap), bitmap,
                             pages, interval, start, &runs) < 0)
            goto off;
        start += step;
    }
    rc = 0;
off:
    if (xc_shadow_control(xch, domid, XEN_DOMCTL_SHADOW_OP_OFF, NULL, 0) < 0) {
        fprintf(stderr, "memcanal-logdirty: off: %s\n", strerror(errno));
        rc = 1;
    }
out:
    free(runs.pairs);
    xc_hypercall_buffer_free_pages(xch, bitmap, nr_pages);
    return rc;
}

int main(int argc, char **argv)
{
    struct sigaction action = { .sa_handler = on_signal };
    xc_interface *xch;
    char *end;
    unsigned long domid, count;
    double interval_s;
    int rc;

    if (argc != 4) {
        fprintf(stderr, "usage: memcanal-logdirty DOMID INTERVAL_S COUNT\n");
        return 2;
    }
    domid = strtoul(argv[1], &end, 10);
    interval_s = strtod(argv[2], NULL);
    count = strtoul(argv[3], NULL, 10);
    if (*end || !domid || interval_s <= 0) {
        fprintf(stderr, "memcanal-logdirty: bad arguments\n");
        return 2;
    }
    /* No SA_RESTART: the signal ends the sleep. */
    sigaction(SIGTERM, &action, NULL);
    sigaction(SIGINT, &action, NULL);
    xch = xc_interface_open(NULL, NULL, 0);
    if (!xch) {
        fprintf(stderr, "memcanal-logdirty: xc_interface_open: %s\n",
                strerror(errno));
        return 1;
    }
    rc = run(xch, domid, interval_s, count);
    xc_interface_close(xch);
    return rc;
}
