/*
 * wsswork: the PRL paper's synthetic application (Bitchebe et al.,
 * Listing 2), run inside the test guest.
 *
 *   wsswork SIZE_MB ORDER PHASE_SECONDS
 *
 * An array of SIZE_MB is written once (so every page is a distinct,
 * present page: an untouched anonymous page would be read through the
 * shared zero page), then parsed one reference per 4 KiB page, pass after
 * pass, for PHASE_SECONDS per phase:
 *   RWRW  every read of a page is followed by a write to it, two phases;
 *   RRWW  a phase of reads, then a phase of writes;
 *   WWRR  a phase of writes, then a phase of reads.
 * The working set is the array: SIZE_MB.
 *
 * It prints, on the console, one line per phase,
 *   wsswork: phase=RR passes=.. ops=.. ns=.. ops_per_us=..
 * (the paper's Listing 1 metric is operations per nanosecond), the
 * array's guest-physical page frames from /proc/self/pagemap, and a final
 * "wsswork: done". Lines start with "wsswork:" so a host can find them in
 * the serial log.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* The lowest and highest page frame of the array, and how many of its
 * pages are present: what the host sees as the working set's GPAs. */
static void print_frames(const char *array, size_t pages)
{
    int fd = open("/proc/self/pagemap", O_RDONLY);
    uint64_t low = UINT64_MAX, high = 0, present = 0, entry;
    size_t i;

    if (fd < 0) {
        perror("wsswork: pagemap");
        return;
    }
    for (i = 0; i < pages; i++) {
        off_t offset = ((uintptr_t)(array + i * PAGE) / PAGE) * 8;

        if (pread(fd, &entry, 8, offset) != 8 || !(entry >> 63))
            continue;
        entry &= (1ULL << 55) - 1;
        present++;
        low = entry < low ? entry : low;
        high = entry > high ? entry : high;
    }
    close(fd);
    printf("wsswork: frames present=%llu low=%llu high=%llu\n",
           (unsigned long long)present, (unsigned long long)low,
           (unsigned long long)high);
}

/* Parse the array for ``seconds``, reading (op 'R'), writing ('W') or
 * reading then writing each page ('B'); print the phase's throughput. */
static void phase(volatile uint64_t *array, size_t pages, char op,
                  const char *name, double seconds)
{
    uint64_t start = now_ns(), end = start, ops = 0, passes = 0, sum = 0;
    uint64_t stop = start + (uint64_t)(seconds * 1e9);
    size_t words = PAGE / sizeof(uint64_t), i;

    printf("wsswork: phase=%s start\n", name);
    fflush(stdout);
    do {
        for (i = 0; i < pages; i++) {
            volatile uint64_t *word = array + i * words + (passes % words);

            if (op != 'W')
                sum += *word;
            if (op != 'R')
                *word = passes + i;
        }
        ops += op == 'B' ? 2 * pages : pages;
        passes++;
        end = now_ns();
    } while (end < stop);
    printf("wsswork: phase=%s passes=%llu ops=%llu ns=%llu "
           "ops_per_us=%.3f sum=%llu\n", name, (unsigned long long)passes,
           (unsigned long long)ops, (unsigned long long)(end - start),
           1000.0 * ops / (end - start), (unsigned long long)sum);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    size_t bytes, pages, i;
    double seconds;
    const char *order;
    uint64_t *array;

    if (argc != 4) {
        fprintf(stderr, "usage: wsswork SIZE_MB RWRW|RRWW|WWRR "
                "PHASE_SECONDS\n");
        return 2;
    }
    bytes = strtoul(argv[1], NULL, 10) << 20;
    order = argv[2];
    seconds = strtod(argv[3], NULL);
    pages = bytes / PAGE;
    if (!pages || seconds <= 0 || (strcmp(order, "RWRW")
            && strcmp(order, "RRWW") && strcmp(order, "WWRR"))) {
        fprintf(stderr, "wsswork: bad arguments\n");
        return 2;
    }
    array = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (array == MAP_FAILED) {
        perror("wsswork: mmap");
        return 1;
    }
    for (i = 0; i < pages; i++)
        array[i * (PAGE / sizeof(uint64_t))] = i;
    printf("wsswork: size_mb=%zu pages=%zu order=%s phase_s=%.1f\n",
           bytes >> 20, pages, order, seconds);
    print_frames((const char *)array, pages);
    if (!strcmp(order, "RWRW")) {
        phase(array, pages, 'B', "RW", seconds);
        phase(array, pages, 'B', "RW", seconds);
    } else if (!strcmp(order, "RRWW")) {
        phase(array, pages, 'R', "RR", seconds);
        phase(array, pages, 'W', "WW", seconds);
    } else {
        phase(array, pages, 'W', "WW", seconds);
        phase(array, pages, 'R', "RR", seconds);
    }
    printf("wsswork: done\n");
    fflush(stdout);
    return 0;
}
