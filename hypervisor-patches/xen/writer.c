/*
 * memcanal-writer: a guest workload whose written frames are known, to
 * check a host's dirty log against (the Xen domU's /init runs it).
 *
 *   memcanal-writer SIZE_MB WRITE_S IDLE_S
 *
 * SIZE_MB of memory is locked in place (mlock: its frames cannot move
 * under the host's log), then every page of it is written once per pass,
 * passes back to back, for WRITE_S seconds; then nothing is written for
 * IDLE_S seconds. A host logging the guest's writes should see every
 * frame of the set dirty in each interval inside the writing phase, and
 * none of them in the idle phase. It prints, on the console:
 *   writer: pages=N pfns=[[first, count], ...]   the set, as frame runs
 *   writer: writing                              the phases' starts
 *   writer: wrote passes=P ns=T longest_ns=L     L: the longest pass
 *   writer: idle
 *   writer: done
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096UL

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

/* The guest frame of the page at ``address``, from /proc/self/pagemap;
 * -1 if it is not present. */
static int64_t frame_of(int pagemap, const void *address)
{
    uint64_t entry;
    off_t offset = (uintptr_t)address / PAGE * 8;

    if (pread(pagemap, &entry, 8, offset) != 8 || !(entry >> 63))
        return -1;
    return entry & ((1ULL << 55) - 1);
}

static int compare_frames(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

    return (x > y) - (x < y);
}

/* Print the array's frames, sorted, as [first, count] runs. */
static int print_frames(const char *array, size_t pages)
{
    int64_t *frames = calloc(pages, sizeof(*frames));
    int pagemap = open("/proc/self/pagemap", O_RDONLY);
    size_t i, run = 1;

    if (!frames || pagemap < 0) {
        perror("writer: pagemap");
        return -1;
    }
    for (i = 0; i < pages; i++) {
        frames[i] = frame_of(pagemap, array + i * PAGE);
        if (frames[i] < 0) {
            fprintf(stderr, "writer: page %zu not present\n", i);
            return -1;
        }
    }
    close(pagemap);
    qsort(frames, pages, sizeof(*frames), compare_frames);
    printf("writer: pages=%zu pfns=[", pages);
    for (i = 1; i <= pages; i++) {
        if (i < pages && frames[i] == frames[i - 1] + 1) {
            run++;
            continue;
        }
        printf("%s[%lld, %zu]", run == i ? "" : ", ",
               (long long)frames[i - run], run);
        run = 1;
    }
    printf("]\n");
    fflush(stdout);
    free(frames);
    return 0;
}

int main(int argc, char **argv)
{
    size_t pages, i;
    uint64_t start, stop, passes = 0, began, ended, longest = 0;
    volatile uint64_t *array;
    double write_s, idle_s;

    if (argc != 4) {
        fprintf(stderr, "usage: memcanal-writer SIZE_MB WRITE_S IDLE_S\n");
        return 2;
    }
    pages = (strtoul(argv[1], NULL, 10) << 20) / PAGE;
    write_s = strtod(argv[2], NULL);
    idle_s = strtod(argv[3], NULL);
    if (!pages || write_s <= 0 || idle_s < 0) {
        fprintf(stderr, "writer: bad arguments\n");
        return 2;
    }
    array = mmap(NULL, pages * PAGE, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (array == MAP_FAILED || mlock((void *)array, pages * PAGE)) {
        perror("writer: mmap");
        return 1;
    }
    if (print_frames((const char *)array, pages) < 0)
        return 1;
    printf("writer: writing\n");
    fflush(stdout);
    start = now_ns();
    stop = start + (uint64_t)(write_s * 1e9);
    ended = start;
    do {
        began = ended;
        for (i = 0; i < pages; i++)
            array[i * (PAGE / sizeof(uint64_t))] = passes;
        passes++;
        ended = now_ns();
        /* A host's interval holds a whole pass only if no pass is longer
         * than half of it: the log's test needs the slowest, not the
         * mean (a loaded host starves a logged guest unevenly). */
        if (ended - began > longest)
            longest = ended - began;
    } while (ended < stop);
    printf("writer: wrote passes=%llu ns=%llu longest_ns=%llu\n"
           "writer: idle\n", (unsigned long long)passes,
           (unsigned long long)(ended - start),
           (unsigned long long)longest);
    fflush(stdout);
    usleep((useconds_t)(idle_s * 1e6));
    printf("writer: done\n");
    fflush(stdout);
    return 0;
}
