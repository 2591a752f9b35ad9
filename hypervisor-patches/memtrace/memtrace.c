/*
 * memtrace: PRL and PML page-reference logs from a real guest, as a QEMU
 * TCG plugin.
 *
 * PRL does not exist in hardware (Bitchebe et al. emulated it in Gem5);
 * this plugin watches every guest load and store, takes its
 * guest-physical page, and logs it the way the paper's hardware would
 * (sections 2.1, 3.1-3.3), with memcanal.estimation.logsim's semantics:
 *
 * - PRL_PAML: every reference that misses an emulated per-vCPU TLB
 *   (fully associative LRU of tlb_entries), reads and writes alike, goes
 *   into that vCPU's log of log_entries. A full log is handed over
 *   without stopping the vCPU: it is copied into the vCPU's ring (the
 *   "larger buffer" of section 3.3) and the index is reset. For that copy
 *   plus handler_base_ns (the IPI and VM exit of the dom0 CPU) the log is
 *   busy, and so it stays while the ring is full: references that miss
 *   the TLB meanwhile are missed and counted (Table 2).
 * - PML: the first write to a page in a dirty epoch goes into the vCPU's
 *   PML log. A full log is a VM exit handled on the VM's own CPU: the
 *   vCPU copies it into the ring, waiting for room if need be, and then
 *   runs for handler_base_ns on nothing; all of it counts as the VM's.
 *
 * The handler thread (the "dom0 CPU") drains the rings to the consumer,
 * memcanal's agent (memcanal.agent.drivers.qemu), which connects to the
 * Unix socket ``socket=PATH`` and reads records (struct record, then
 * ``count`` 64-bit words). The consumer may send one-byte commands: 'S'
 * flushes the partial PML logs (as KVM's dirty-log sync does) and answers
 * with a SYNC record of counters; 'C' starts a new dirty epoch.
 *
 * Options: mode=prl|pml|both|off (off watches references and logs
 * nothing: the cost of instrumentation alone), log_entries=512,
 * tlb_entries=64, ring_logs=2048 (logs each vCPU's ring holds),
 * handler_base_ns=1000, epoch_ms=0 (a new dirty epoch every so often;
 * 0: only when the consumer asks), socket=PATH, wait=on|off (hold the
 * guest until a consumer connects; default on), max_gpa_gb=64 (the
 * dirty bitmap's reach), uuid=, memory_mb= (passed on to the consumer),
 * code=on|off (default off; see on_translate).
 *
 * code=on also puts into the PRL log, past the TLB, each guest page TCG
 * reads code from when it translates a block. The plugin sees no
 * instruction fetch (a translated block runs without reading its page
 * again), but the translation's read is the hypervisor's access to the
 * page, the one a sampler that unmaps guest pages sees. The page is
 * found from the instruction's host address in the mapping of a memfd
 * holding the guest's RAM (/proc/self/maps: the file offset is the
 * guest-physical address of a RAM of one block from 0, as a pc
 * machine's below 4 GiB is); code elsewhere (the BIOS ROM; all of it
 * when the RAM is not a memfd) is not logged. Still unseen: the guest's page tables that QEMU walks on its
 * TLB misses, and device (DMA) accesses.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <qemu-plugin.h>

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

#define PAGE_SHIFT 12
#define MAGIC 0x3152544dU /* "MTR1" */
#define MAX_TLB 4096
#define UUID_WORDS 5
#define COUNTERS 11

enum record_kind {
    RECORD_HELLO = 1,       /* words: the configuration, see send_hello */
    RECORD_PRL = 2,         /* words: a full PRL log's pages */
    RECORD_PML = 3,         /* words: a full PML log's pages */
    RECORD_PML_PARTIAL = 4, /* words: a partial PML log, on 'S' */
    RECORD_SYNC = 5,        /* words: the counters, see sum_counters */
};

struct record {
    uint32_t magic;
    uint16_t kind;
    uint16_t vcpu;
    uint32_t count;         /* 64-bit words that follow */
    uint32_t reserved;
    uint64_t time_ns;       /* CLOCK_MONOTONIC when the log filled */
};

enum { MODE_OFF = 0, MODE_PRL = 1, MODE_PML = 2 };

struct slot {
    uint16_t kind;
    uint32_t count;
    uint64_t time_ns;
    uint64_t *words;
};

struct vcpu {
    /* The emulated TLB: page numbers, most recently used first. */
    uint64_t *tlb;
    unsigned tlb_used;
    /* The ring of full logs: the vCPU fills slots, the handler thread
     * empties them. */
    struct slot *ring;
    atomic_uint_fast64_t head, tail;
    /* PRL: the log is full while prl_index == log_entries, and busy
     * until prl_busy_until (0 when not busy). */
    uint64_t *prl;
    unsigned prl_index;
    uint64_t prl_full_at, prl_busy_until;
    /* PML, under pml_lock: the vCPU, and 'S' from the handler thread. */
    pthread_mutex_t pml_lock;
    uint64_t *pml;
    unsigned pml_index;
    /* Counters, each written by one thread and read by any. */
    atomic_uint_fast64_t references, tlb_misses, prl_logged, prl_missed,
                         prl_events, prl_handler_ns, pml_logged,
                         pml_events, pml_vm_ns;
};

static int mode = MODE_PRL | MODE_PML;
static unsigned log_entries = 512, tlb_entries = 64, ring_logs = 2048;
static unsigned n_vcpus;
static uint64_t handler_base_ns = 1000, epoch_ns, dirty_words;
static bool wait_for_consumer = true, log_code;
static const char *socket_path, *instance_uuid = "";
static uint64_t memory_mb;
static struct vcpu *vcpus;
static atomic_uint_fast64_t *dirty;  /* one bit per guest page */
static atomic_uint_fast64_t epochs, beyond_bitmap;

/* The consumer's socket is the handler thread's alone. */
static int listen_fd = -1, consumer_fd = -1;
static pthread_t handler_thread;
static atomic_bool stopping;

/* code=on: the vCPU whose thread translates (set by its references; one
 * thread per vCPU or one for all, either way the last one run here), and
 * the guest RAM's memfd mapping: host start, end, file offset. */
static __thread struct vcpu *current_vcpu;
static uintptr_t ram_start, ram_end, ram_offset;
/* Mappings found not to be the RAM's memfd (a ROM's; the whole RAM when
 * it is not in a memfd), so that maps is read once for each. */
#define OTHER_MAPPINGS 64
static uintptr_t other_start[OTHER_MAPPINGS], other_end[OTHER_MAPPINGS];
static unsigned others;

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static bool write_all(int fd, const void *data, size_t size)
{
    const char *bytes = data;

    while (size) {
        ssize_t done = send(fd, bytes, size, MSG_NOSIGNAL);

        if (done < 0 && errno == EINTR)
            continue;
        if (done <= 0)
            return false;
        bytes += done;
        size -= done;
    }
    return true;
}

/* One record to the consumer. If it went away the record is dropped and
 * the consumer forgotten: a guest outlives its agent. */
static void send_record(uint16_t kind, unsigned vcpu, uint64_t time_ns,
                        const uint64_t *words, uint32_t count)
{
    struct record header = {
        .magic = MAGIC, .kind = kind, .vcpu = vcpu, .count = count,
        .time_ns = time_ns,
    };

    if (consumer_fd >= 0 && !(write_all(consumer_fd, &header, sizeof(header))
                              && write_all(consumer_fd, words,
                                           count * sizeof(*words)))) {
        close(consumer_fd);
        consumer_fd = -1;
    }
}

static void send_hello(void)
{
    uint64_t words[8 + UUID_WORDS] = {
        mode, log_entries, tlb_entries, n_vcpus, 1ULL << PAGE_SHIFT,
        epoch_ns, memory_mb, handler_base_ns,
    };

    /* The instance's uuid, NUL-padded. */
    strncpy((char *)&words[8], instance_uuid, UUID_WORDS * 8 - 1);
    send_record(RECORD_HELLO, 0, now_ns(), words, 8 + UUID_WORDS);
}

/* The sums over vCPUs of every counter, in the order memcanal reads. */
static void sum_counters(uint64_t words[COUNTERS])
{
    unsigned i;

    memset(words, 0, COUNTERS * sizeof(*words));
    for (i = 0; i < n_vcpus; i++) {
        struct vcpu *v = &vcpus[i];

        words[0] += atomic_load(&v->references);
        words[1] += atomic_load(&v->tlb_misses);
        words[2] += atomic_load(&v->prl_events);
        words[3] += atomic_load(&v->prl_logged);
        words[4] += atomic_load(&v->prl_missed);
        words[5] += atomic_load(&v->prl_handler_ns);
        words[6] += atomic_load(&v->pml_events);
        words[7] += atomic_load(&v->pml_logged);
        words[8] += atomic_load(&v->pml_vm_ns);
    }
    words[9] = atomic_load(&epochs);
    words[10] = atomic_load(&beyond_bitmap);
}

static void new_dirty_epoch(void)
{
    uint64_t i;

    for (i = 0; i < dirty_words; i++)
        atomic_store_explicit(&dirty[i], 0, memory_order_relaxed);
    atomic_fetch_add(&epochs, 1);
}

/* A full log into the vCPU's ring; false when the ring is full. */
static bool push_log(struct vcpu *v, uint16_t kind, uint64_t time_ns,
                     const uint64_t *words)
{
    uint64_t head = atomic_load_explicit(&v->head, memory_order_relaxed);
    struct slot *slot;

    if (head - atomic_load_explicit(&v->tail, memory_order_acquire)
            >= ring_logs)
        return false;
    slot = &v->ring[head % ring_logs];
    slot->kind = kind;
    slot->count = log_entries;
    slot->time_ns = time_ns;
    memcpy(slot->words, words, log_entries * sizeof(*words));
    atomic_store_explicit(&v->head, head + 1, memory_order_release);
    return true;
}

/* The handler's copy: every vCPU's full logs to the consumer. True if
 * there were any. */
static bool drain_rings(void)
{
    bool drained = false;
    unsigned i;

    for (i = 0; i < n_vcpus; i++) {
        struct vcpu *v = &vcpus[i];
        uint64_t tail = atomic_load_explicit(&v->tail, memory_order_relaxed);

        while (tail != atomic_load_explicit(&v->head, memory_order_acquire)) {
            struct slot *slot = &v->ring[tail % ring_logs];

            send_record(slot->kind, i, slot->time_ns, slot->words,
                        slot->count);
            atomic_store_explicit(&v->tail, ++tail, memory_order_release);
            drained = true;
        }
    }
    return drained;
}

/* 'S': the full logs so far, the partial PML logs, then the counters. A
 * vCPU that holds its PML lock may be waiting for ring room, so the lock
 * is only tried, with the rings drained between tries. */
static void sync_logs(void)
{
    uint64_t counters[COUNTERS];
    unsigned i;

    for (i = 0; i < n_vcpus; i++) {
        struct vcpu *v = &vcpus[i];

        drain_rings();
        if (!(mode & MODE_PML))
            continue;
        while (pthread_mutex_trylock(&v->pml_lock))
            drain_rings();
        drain_rings();
        if (v->pml_index)
            send_record(RECORD_PML_PARTIAL, i, now_ns(), v->pml,
                        v->pml_index);
        v->pml_index = 0;
        pthread_mutex_unlock(&v->pml_lock);
    }
    sum_counters(counters);
    send_record(RECORD_SYNC, 0, now_ns(), counters, COUNTERS);
}

static void read_commands(void)
{
    char commands[64];
    ssize_t count, i;

    if (consumer_fd < 0)
        return;
    count = recv(consumer_fd, commands, sizeof(commands), MSG_DONTWAIT);
    if (count == 0) {
        close(consumer_fd);
        consumer_fd = -1;
    }
    for (i = 0; i < count; i++) {
        if (commands[i] == 'S')
            sync_logs();
        else if (commands[i] == 'C')
            new_dirty_epoch();
    }
}

static void accept_consumer(int timeout_ms)
{
    struct pollfd ready = { .fd = listen_fd, .events = POLLIN };
    int fd;

    if (poll(&ready, 1, timeout_ms) <= 0)
        return;
    fd = accept(listen_fd, NULL, NULL);
    if (fd < 0)
        return;
    if (consumer_fd >= 0)
        close(consumer_fd);
    consumer_fd = fd;
    send_hello();
}

/* The handler thread: every millisecond it drains the rings and looks at
 * the consumer's connection, its commands and the epoch. It polls rather
 * than being woken, because waking a thread costs the vCPU a system call
 * per log; a ring of 2048 logs holds some 150 ms of the busiest guest. */
static void *handler_main(void *unused)
{
    uint64_t next_epoch = now_ns() + epoch_ns;

    (void)unused;
    while (!atomic_load(&stopping)) {
        if (drain_rings())
            continue;
        if (consumer_fd < 0 && listen_fd >= 0)
            accept_consumer(0);
        read_commands();
        if (epoch_ns && now_ns() >= next_epoch) {
            new_dirty_epoch();
            next_epoch = now_ns() + epoch_ns;
        }
        nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
    }
    return NULL;
}

/* True if ``page`` is in the TLB; it becomes the most recently used. */
static bool tlb_lookup(struct vcpu *v, uint64_t page)
{
    unsigned i;

    for (i = 0; i < v->tlb_used && v->tlb[i] != page; i++)
        ;
    if (i < v->tlb_used) {
        memmove(v->tlb + 1, v->tlb, i * sizeof(*v->tlb));
        v->tlb[0] = page;
        return true;
    }
    if (v->tlb_used < tlb_entries)
        v->tlb_used++;
    memmove(v->tlb + 1, v->tlb, (v->tlb_used - 1) * sizeof(*v->tlb));
    v->tlb[0] = page;
    return false;
}

/* The full PRL log to the ring, if it has room: the index is reset and
 * the log is busy for handler_base_ns more. False if the ring is full. */
static bool hand_over_prl(struct vcpu *v)
{
    if (!push_log(v, RECORD_PRL, v->prl_full_at, v->prl))
        return false;
    v->prl_index = 0;
    v->prl_busy_until = now_ns() + handler_base_ns;
    atomic_fetch_add(&v->prl_handler_ns, v->prl_busy_until - v->prl_full_at);
    return true;
}

/* A TLB miss under PRL_PAML (section 3.2's algorithm). */
static void log_prl(struct vcpu *v, uint64_t page)
{
    if (v->prl_busy_until) {
        if (now_ns() < v->prl_busy_until)
            goto missed;
        v->prl_busy_until = 0;
    }
    if (v->prl_index == log_entries) {
        /* Still full, the ring had no room: the handler takes it when it
         * can; this reference is missed either way. */
        hand_over_prl(v);
        goto missed;
    }
    v->prl[v->prl_index++] = page;
    atomic_fetch_add_explicit(&v->prl_logged, 1, memory_order_relaxed);
    if (v->prl_index == log_entries) {
        v->prl_full_at = now_ns();
        atomic_fetch_add(&v->prl_events, 1);
        hand_over_prl(v);
    }
    return;
missed:
    atomic_fetch_add_explicit(&v->prl_missed, 1, memory_order_relaxed);
}

/* A write under PML: logged if it sets the page's dirty bit. */
static void log_pml(struct vcpu *v, uint64_t page)
{
    uint64_t word = page / 64, bit = 1ULL << (page % 64);

    if (word >= dirty_words) {
        atomic_fetch_add(&beyond_bitmap, 1);
        return;
    }
    if (atomic_fetch_or_explicit(&dirty[word], bit, memory_order_relaxed)
            & bit)
        return;
    pthread_mutex_lock(&v->pml_lock);
    v->pml[v->pml_index++] = page;
    atomic_fetch_add_explicit(&v->pml_logged, 1, memory_order_relaxed);
    if (v->pml_index == log_entries) {
        uint64_t start = now_ns(), stop;

        /* The VM exit: this vCPU waits for ring room and pays the exit. */
        while (!push_log(v, RECORD_PML, start, v->pml))
            ;
        v->pml_index = 0;
        stop = now_ns() + handler_base_ns;
        while (now_ns() < stop)
            ;
        atomic_fetch_add(&v->pml_events, 1);
        atomic_fetch_add(&v->pml_vm_ns, now_ns() - start);
    }
    pthread_mutex_unlock(&v->pml_lock);
}

static void on_memory(unsigned int index, qemu_plugin_meminfo_t info,
                      uint64_t vaddr, void *unused)
{
    struct qemu_plugin_hwaddr *hwaddr;
    struct vcpu *v = &vcpus[index];
    uint64_t page;

    (void)unused;
    current_vcpu = v;
    if (mode == MODE_OFF)
        return;
    hwaddr = qemu_plugin_get_hwaddr(info, vaddr);
    if (!hwaddr || qemu_plugin_hwaddr_is_io(hwaddr))
        return;
    page = qemu_plugin_hwaddr_phys_addr(hwaddr) >> PAGE_SHIFT;
    atomic_fetch_add_explicit(&v->references, 1, memory_order_relaxed);
    if ((mode & MODE_PRL) && !tlb_lookup(v, page)) {
        atomic_fetch_add_explicit(&v->tlb_misses, 1, memory_order_relaxed);
        log_prl(v, page);
    }
    if ((mode & MODE_PML) && qemu_plugin_mem_is_store(info))
        log_pml(v, page);
}

/* Whether ``host`` lies in the memfd mapping of QEMU's own address
 * space that holds the RAM (which it then becomes); a mapping that is
 * not is remembered as such. */
static bool find_ram(uintptr_t host)
{
    char line[512];
    FILE *maps;
    bool found = false;
    unsigned i;

    for (i = 0; i < others; i++)
        if (other_start[i] <= host && host < other_end[i])
            return false;
    maps = fopen("/proc/self/maps", "r");
    if (!maps)
        return false;
    while (fgets(line, sizeof(line), maps)) {
        uintptr_t start, end, offset;

        if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %*s %" SCNxPTR,
                   &start, &end, &offset) != 3 || host < start
                || host >= end)
            continue;
        if (strstr(line, "/memfd:")) {
            ram_start = start;
            ram_end = end;
            ram_offset = offset;
            found = true;
        } else if (others < OTHER_MAPPINGS) {
            other_start[others] = start;
            other_end[others++] = end;
        }
        break;
    }
    fclose(maps);
    return found;
}

/* code=on: the guest pages of a block being translated, each once, into
 * the translating vCPU's PRL log. */
static void log_code_pages(struct qemu_plugin_tb *tb, size_t count)
{
    struct vcpu *v = current_vcpu ? current_vcpu : &vcpus[0];
    uint64_t last = UINT64_MAX;
    size_t i;

    for (i = 0; i < count; i++) {
        uintptr_t host = (uintptr_t)qemu_plugin_insn_haddr(
            qemu_plugin_tb_get_insn(tb, i));
        uint64_t page;

        if (!host || ((host < ram_start || host >= ram_end)
                      && !find_ram(host)))
            continue;
        page = (host - ram_start + ram_offset) >> PAGE_SHIFT;
        if (page != last)
            log_prl(v, page);
        last = page;
    }
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    size_t count = qemu_plugin_tb_n_insns(tb), i;

    for (i = 0; i < count; i++)
        qemu_plugin_register_vcpu_mem_cb(qemu_plugin_tb_get_insn(tb, i),
                                         on_memory, QEMU_PLUGIN_CB_NO_REGS,
                                         QEMU_PLUGIN_MEM_RW, NULL);
    if (log_code && (mode & MODE_PRL))
        log_code_pages(tb, count);
}

/* The last logs and counters to the consumer, and the counters to
 * stderr, for a run without one. */
static void plugin_exit(qemu_plugin_id_t id, void *unused)
{
    uint64_t totals[COUNTERS];

    (void)id;
    (void)unused;
    atomic_store(&stopping, true);
    pthread_join(handler_thread, NULL);
    sync_logs();
    sum_counters(totals);
    fprintf(stderr, "memtrace: references=%" PRIu64 " tlb_misses=%" PRIu64
            " prl_events=%" PRIu64 " prl_logged=%" PRIu64 " prl_missed=%"
            PRIu64 " prl_handler_ns=%" PRIu64 " pml_events=%" PRIu64
            " pml_logged=%" PRIu64 " pml_vm_ns=%" PRIu64 " epochs=%" PRIu64
            " beyond_bitmap=%" PRIu64 "\n",
            totals[0], totals[1], totals[2], totals[3], totals[4],
            totals[5], totals[6], totals[7], totals[8], totals[9],
            totals[10]);
    if (consumer_fd >= 0)
        close(consumer_fd);
    if (socket_path)
        unlink(socket_path);
}

static int open_socket(void)
{
    struct sockaddr_un address = { .sun_family = AF_UNIX };

    if (strlen(socket_path) >= sizeof(address.sun_path)) {
        fprintf(stderr, "memtrace: socket path too long\n");
        return -1;
    }
    strcpy(address.sun_path, socket_path);
    unlink(socket_path);
    listen_fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (listen_fd < 0 || bind(listen_fd, (struct sockaddr *)&address,
                              sizeof(address)) || listen(listen_fd, 1)) {
        perror("memtrace: socket");
        return -1;
    }
    return 0;
}

static bool parse_option(const char *option)
{
    const char *value = strchr(option, '=');
    size_t name_length;

    if (!value)
        return false;
    name_length = value++ - option;
#define IS(name) (name_length == strlen(name) \
                  && !strncmp(option, name, name_length))
    if (IS("mode")) {
        if (!strcmp(value, "prl"))
            mode = MODE_PRL;
        else if (!strcmp(value, "pml"))
            mode = MODE_PML;
        else if (!strcmp(value, "both"))
            mode = MODE_PRL | MODE_PML;
        else if (!strcmp(value, "off"))
            mode = MODE_OFF;
        else
            return false;
    } else if (IS("log_entries")) {
        log_entries = strtoul(value, NULL, 10);
    } else if (IS("tlb_entries")) {
        tlb_entries = strtoul(value, NULL, 10);
    } else if (IS("ring_logs")) {
        ring_logs = strtoul(value, NULL, 10);
    } else if (IS("handler_base_ns")) {
        handler_base_ns = strtoull(value, NULL, 10);
    } else if (IS("epoch_ms")) {
        epoch_ns = strtoull(value, NULL, 10) * 1000000ULL;
    } else if (IS("max_gpa_gb")) {
        dirty_words = (strtoull(value, NULL, 10) << (30 - PAGE_SHIFT)) / 64;
    } else if (IS("socket")) {
        socket_path = value;
    } else if (IS("wait")) {
        wait_for_consumer = strcmp(value, "off") != 0;
    } else if (IS("uuid")) {
        instance_uuid = value;
    } else if (IS("code")) {
        log_code = !strcmp(value, "on");
    } else if (IS("memory_mb")) {
        memory_mb = strtoull(value, NULL, 10);
    } else {
        return false;
    }
#undef IS
    return true;
}

static bool allocate_vcpu(struct vcpu *v)
{
    unsigned i;

    v->tlb = calloc(tlb_entries, sizeof(uint64_t));
    v->prl = calloc(log_entries, sizeof(uint64_t));
    v->pml = calloc(log_entries, sizeof(uint64_t));
    v->ring = calloc(ring_logs, sizeof(*v->ring));
    if (!v->tlb || !v->prl || !v->pml || !v->ring)
        return false;
    for (i = 0; i < ring_logs; i++) {
        v->ring[i].words = calloc(log_entries, sizeof(uint64_t));
        if (!v->ring[i].words)
            return false;
    }
    pthread_mutex_init(&v->pml_lock, NULL);
    return true;
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id,
                                           const qemu_info_t *info,
                                           int argc, char **argv)
{
    unsigned i;

    dirty_words = (64ULL << (30 - PAGE_SHIFT)) / 64;
    for (i = 0; i < (unsigned)argc; i++) {
        if (!parse_option(argv[i])) {
            fprintf(stderr, "memtrace: bad option %s\n", argv[i]);
            return -1;
        }
    }
    if (!info->system_emulation || !log_entries || !ring_logs
            || !tlb_entries || tlb_entries > MAX_TLB || !dirty_words) {
        fprintf(stderr, "memtrace: needs system emulation, log_entries, "
                "ring_logs and max_gpa_gb >= 1, 1 <= tlb_entries <= %d\n",
                MAX_TLB);
        return -1;
    }
    n_vcpus = info->system.max_vcpus;
    vcpus = calloc(n_vcpus, sizeof(*vcpus));
    dirty = calloc(dirty_words, sizeof(*dirty));
    if (!vcpus || !dirty)
        return -1;
    for (i = 0; i < n_vcpus; i++)
        if (!allocate_vcpu(&vcpus[i]))
            return -1;
    if (socket_path) {
        if (open_socket())
            return -1;
        if (wait_for_consumer) {
            fprintf(stderr, "memtrace: waiting for a consumer on %s\n",
                    socket_path);
            while (consumer_fd < 0)
                accept_consumer(-1);
        }
    }
    if (pthread_create(&handler_thread, NULL, handler_main, NULL))
        return -1;
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    qemu_plugin_register_atexit_cb(id, plugin_exit, NULL);
    return 0;
}
