/*
 * LRU stack distances and SHARDS sampling in C for memcanal.estimation.
 *
 * This is the one implementation of the per-reference loops that numpy
 * cannot vectorise (each reference depends on the state the previous ones
 * left). memcanal.estimation.mrc wraps it; nothing else calls it.
 *
 * Inputs are 1-D buffers of page numbers (signed or unsigned 8-byte
 * integers, any stride, so a column of a memory-mapped oracleGeneral
 * trace is read in place). Outputs are writable contiguous int64 or
 * float64 buffers the caller allocates.
 *
 * Stack distances count marked "time slots": each page's most recent
 * reference holds one marked slot, and the marks after a page's previous
 * slot count the distinct pages touched since. Pages are dense
 * guest-physical page numbers, so a plain array indexed by page replaces
 * a hash table. The slot window is twice the page universe and is
 * compacted when full, so the counting structures stay small enough for the CPU caches
 * whatever the trace length.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    Py_buffer view;
    const char *base;
    Py_ssize_t stride;
    Py_ssize_t length;
} page_input;

/* The buffers one call holds; each function releases them all at one
 * exit, whichever it acquired (an unacquired buffer has obj NULL). */
typedef struct {
    page_input in;
    Py_buffer flags;      /* a second, 1-byte input (ghost_positions) */
    Py_buffer out[2];
} call_buffers;

static void
release(call_buffers *c)
{
    Py_buffer *views[] = {&c->in.view, &c->flags, &c->out[0], &c->out[1]};
    for (size_t i = 0; i < sizeof(views) / sizeof(views[0]); i++) {
        if (views[i]->obj)
            PyBuffer_Release(views[i]);
    }
}

static int
open_pages(PyObject *obj, page_input *in)
{
    if (PyObject_GetBuffer(obj, &in->view,
                           PyBUF_STRIDES | PyBUF_FORMAT) < 0)
        return -1;
    const char *fmt = in->view.format ? in->view.format : "B";
    if (*fmt == '<' || *fmt == '=' || *fmt == '@')
        fmt++;
    if (in->view.ndim != 1 || in->view.itemsize != 8 ||
        strchr("qQlLnN", fmt[0]) == NULL || fmt[1] != '\0') {
        PyErr_SetString(PyExc_TypeError,
                        "pages must be a 1-D buffer of 8-byte integers");
        PyBuffer_Release(&in->view);
        return -1;
    }
    in->base = in->view.buf;
    in->stride = in->view.strides[0];
    in->length = in->view.shape[0];
    return 0;
}

static inline uint64_t
page_at(const page_input *in, Py_ssize_t i)
{
    uint64_t value;
    memcpy(&value, in->base + i * in->stride, sizeof(value));
    return value;
}

/* A writable contiguous buffer of at least ``items`` 8-byte items; None
 * leaves ``view`` unacquired (obj NULL) and is accepted when optional. */
static int
open_output(PyObject *obj, Py_buffer *view, Py_ssize_t items,
            const char *what, int optional)
{
    if (optional && obj == Py_None)
        return 0;
    if (PyObject_GetBuffer(obj, view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    if (view->itemsize != 8 || view->len < items * 8) {
        PyErr_Format(PyExc_ValueError, "%s must hold %zd 8-byte items",
                     what, items);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* ---- Counting slots: a bitmap plus a Fenwick tree over its words ---- */

/* Slot marks live in a bitmap of 64-slot words; a Fenwick tree counts the
 * marks per word. Counting the marks after a slot is then a popcount in
 * its word plus a prefix sum over words, a tree 64 times smaller than one
 * over slots, so it stays in L1 for any realistic VM. */
typedef struct {
    uint64_t *bits;       /* one bit per slot: a page's latest reference */
    int32_t *tree;        /* 1-based Fenwick tree of marks per word */
    int64_t *slot_page;   /* page that took the slot */
    int64_t *last_slot;   /* per page: slot of its latest reference, -1 */
    int64_t window;       /* slots, a multiple of 64 */
    int64_t words;
    int64_t next_slot;
    int64_t marked;       /* pages with a live slot */
    int64_t universe;
} lru_stack;

static void
stack_free(lru_stack *s)
{
    free(s->bits);
    free(s->tree);
    free(s->slot_page);
    free(s->last_slot);
    s->bits = NULL;
    s->tree = NULL;
    s->slot_page = NULL;
    s->last_slot = NULL;
}

static int
stack_init(lru_stack *s, int64_t universe)
{
    int64_t window = 1024;
    while (window < 2 * universe)
        window *= 2;
    s->window = window;
    s->words = window / 64;
    s->universe = universe;
    s->next_slot = 0;
    s->marked = 0;
    s->bits = calloc((size_t)s->words, sizeof(uint64_t));
    s->tree = calloc((size_t)s->words + 1, sizeof(int32_t));
    s->slot_page = malloc((size_t)window * sizeof(int64_t));
    s->last_slot = malloc((size_t)(universe > 0 ? universe : 1) *
                          sizeof(int64_t));
    if (!s->bits || !s->tree || !s->slot_page || !s->last_slot) {
        stack_free(s);
        PyErr_NoMemory();
        return -1;
    }
    memset(s->last_slot, 0xff, (size_t)universe * sizeof(int64_t));
    return 0;
}

static inline void
tree_add(lru_stack *s, int64_t word, int32_t delta)
{
    for (int64_t i = word + 1; i <= s->words; i += i & -i)
        s->tree[i] += delta;
}

/* Marks in words [0, word]. */
static inline int64_t
tree_prefix(const lru_stack *s, int64_t word)
{
    int64_t total = 0;
    for (int64_t i = word + 1; i > 0; i -= i & -i)
        total += s->tree[i];
    return total;
}

static inline void
mark(lru_stack *s, int64_t slot)
{
    s->bits[slot >> 6] |= 1ULL << (slot & 63);
    tree_add(s, slot >> 6, 1);
}

static inline void
unmark(lru_stack *s, int64_t slot)
{
    s->bits[slot >> 6] &= ~(1ULL << (slot & 63));
    tree_add(s, slot >> 6, -1);
}

/* Marks in slots after ``slot``. */
static inline int64_t
marks_after(const lru_stack *s, int64_t slot)
{
    int64_t word = slot >> 6;
    uint64_t above = (slot & 63) == 63 ? 0 :
        s->bits[word] >> ((slot & 63) + 1);
    return s->marked - tree_prefix(s, word) + __builtin_popcountll(above);
}

/* Renumber the live slots 0..marked-1 in order and rebuild bitmap and
 * tree in linear time; amortised O(1) per reference since the window is
 * at least twice the live count. */
static void
stack_compact(lru_stack *s)
{
    int64_t next = 0;
    for (int64_t slot = 0; slot < s->next_slot; slot++) {
        if (s->bits[slot >> 6] >> (slot & 63) & 1) {
            int64_t page = s->slot_page[slot];
            s->slot_page[next] = page;
            s->last_slot[page] = next;
            next++;
        }
    }
    memset(s->bits, 0, (size_t)s->words * sizeof(uint64_t));
    memset(s->tree, 0, ((size_t)s->words + 1) * sizeof(int32_t));
    for (int64_t slot = 0; slot < next; slot++)
        s->bits[slot >> 6] |= 1ULL << (slot & 63);
    for (int64_t i = 1; i <= s->words; i++) {
        s->tree[i] += __builtin_popcountll(s->bits[i - 1]);
        int64_t parent = i + (i & -i);
        if (parent <= s->words)
            s->tree[parent] += s->tree[i];
    }
    s->next_slot = next;
}

/* Reference ``page``; return its stack distance, 0 for a first touch. */
static inline int64_t
stack_touch(lru_stack *s, int64_t page)
{
    int64_t distance = 0;
    if (s->next_slot == s->window)
        stack_compact(s);
    int64_t previous = s->last_slot[page];
    if (previous >= 0) {
        distance = marks_after(s, previous) + 1;
        unmark(s, previous);
    } else {
        s->marked++;
    }
    int64_t slot = s->next_slot++;
    mark(s, slot);
    s->slot_page[slot] = page;
    s->last_slot[page] = slot;
    return distance;
}

/* Forget ``page`` (SHARDS lowering its threshold). */
static inline void
stack_forget(lru_stack *s, int64_t page)
{
    int64_t previous = s->last_slot[page];
    if (previous >= 0) {
        unmark(s, previous);
        s->last_slot[page] = -1;
        s->marked--;
    }
}

/* Every page below ``universe``, or a ValueError naming the first that
 * is not. One pass ahead of the loops keeps them free of error paths. */
static int
check_universe(const page_input *in, int64_t universe)
{
    for (Py_ssize_t i = 0; i < in->length; i++) {
        uint64_t page = page_at(in, i);
        if (page >= (uint64_t)universe) {
            PyErr_Format(PyExc_ValueError,
                         "page %llu at %zd is outside the universe of %lld",
                         (unsigned long long)page, i, (long long)universe);
            return -1;
        }
    }
    return 0;
}

PyDoc_STRVAR(stack_distances_doc,
"stack_distances(pages, universe, distances, histogram)\n\n"
"LRU stack distance of every reference to pages in [0, universe).\n"
"``distances`` (int64[n] or None) receives each distance, 0 for a first\n"
"touch; ``histogram`` (int64[min(universe, n) + 1] or None: no distance\n"
"exceeds the pages referenced) is incremented at each distance (index 0\n"
"counts first touches).");

static PyObject *
stack_distances(PyObject *Py_UNUSED(self), PyObject *args)
{
    PyObject *pages_obj, *dist_obj, *hist_obj, *result = NULL;
    long long universe;
    call_buffers c = {0};
    if (!PyArg_ParseTuple(args, "OLOO", &pages_obj, &universe, &dist_obj,
                          &hist_obj) ||
        open_pages(pages_obj, &c.in) < 0)
        return NULL;
    Py_ssize_t most = universe < c.in.length ? universe : c.in.length;
    lru_stack s;
    if (open_output(dist_obj, &c.out[0], c.in.length, "distances", 1) < 0 ||
        open_output(hist_obj, &c.out[1], most + 1, "histogram", 1) < 0 ||
        check_universe(&c.in, universe) < 0 || stack_init(&s, universe) < 0)
        goto done;
    int64_t *out = c.out[0].buf, *counts = c.out[1].buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < c.in.length; i++) {
        int64_t d = stack_touch(&s, (int64_t)page_at(&c.in, i));
        if (out)
            out[i] = d;
        if (counts)
            counts[d]++;
    }
    Py_END_ALLOW_THREADS
    stack_free(&s);
    result = Py_NewRef(Py_None);
done:
    release(&c);
    return result;
}

PyDoc_STRVAR(reuse_times_doc,
"reuse_times(pages, universe, histogram)\n\n"
"Increment int64 ``histogram[len(pages) + 1]`` at each reference's reuse\n"
"time (references since the previous one to the same page; index 0\n"
"counts first touches), the input of AET (Hu et al., ATC'16).");

static PyObject *
reuse_times(PyObject *Py_UNUSED(self), PyObject *args)
{
    PyObject *pages_obj, *hist_obj, *result = NULL;
    long long universe;
    call_buffers c = {0};
    int64_t *last = NULL;
    if (!PyArg_ParseTuple(args, "OLO", &pages_obj, &universe, &hist_obj) ||
        open_pages(pages_obj, &c.in) < 0)
        return NULL;
    if (open_output(hist_obj, &c.out[0], c.in.length + 1, "histogram",
                    0) < 0 ||
        check_universe(&c.in, universe) < 0)
        goto done;
    last = malloc((size_t)(universe > 0 ? universe : 1) * sizeof(int64_t));
    if (!last) {
        PyErr_NoMemory();
        goto done;
    }
    memset(last, 0xff, (size_t)universe * sizeof(int64_t));
    int64_t *counts = c.out[0].buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < c.in.length; i++) {
        uint64_t page = page_at(&c.in, i);
        counts[last[page] < 0 ? 0 : i - last[page]]++;
        last[page] = i;
    }
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    free(last);
    release(&c);
    return result;
}

PyDoc_STRVAR(accumulate_doc,
"accumulate(pages, counts)\n\n"
"Add one to int64 ``counts[page]`` for every page: a log-full handler\n"
"filling the cumulative buffer, without numpy's temporary arrays.");

static PyObject *
accumulate(PyObject *Py_UNUSED(self), PyObject *args)
{
    PyObject *pages_obj, *counts_obj, *result = NULL;
    call_buffers c = {0};
    if (!PyArg_ParseTuple(args, "OO", &pages_obj, &counts_obj) ||
        open_pages(pages_obj, &c.in) < 0)
        return NULL;
    if (open_output(counts_obj, &c.out[0], 0, "counts", 0) < 0 ||
        check_universe(&c.in, c.out[0].len / 8) < 0)
        goto done;
    int64_t *count = c.out[0].buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < c.in.length; i++)
        count[page_at(&c.in, i)]++;
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    release(&c);
    return result;
}

/* ---- Hashing for spatial sampling ------------------------------------ */

/* A page's sampling hash: a randomly shifted golden-ratio lattice
 * (Fibonacci hashing of page + salt). Over salts every page is sampled
 * with probability exactly threshold / 2**24, as SHARDS needs; and since
 * guest pages are dense, any run of consecutive pages is sampled evenly
 * (the count is within one of the rate's share), which removes most of
 * the error a random hash's luck in the number of sampled pages causes.
 * Multiplication by an odd constant is a bijection modulo 2**64, so a
 * uniformly random salt gives a uniformly random hash for each page. */
#define HASH_BITS 24
#define HASH_MODULUS (1 << HASH_BITS)

#define GOLDEN_RATIO_64 0x9e3779b97f4a7c15ULL

static inline uint32_t
page_hash(uint64_t page, uint64_t salt)
{
    return (uint32_t)(((page + salt) * GOLDEN_RATIO_64) >> (64 - HASH_BITS));
}

PyDoc_STRVAR(page_hashes_doc,
"page_hashes(pages, salt, out)\n\n"
"The 24-bit sampling hash of each page into int64 ``out``.");

static PyObject *
page_hashes(PyObject *Py_UNUSED(self), PyObject *args)
{
    PyObject *pages_obj, *out_obj, *result = NULL;
    unsigned long long salt;
    call_buffers c = {0};
    if (!PyArg_ParseTuple(args, "OKO", &pages_obj, &salt, &out_obj) ||
        open_pages(pages_obj, &c.in) < 0)
        return NULL;
    if (open_output(out_obj, &c.out[0], c.in.length, "out", 0) == 0) {
        int64_t *hashes = c.out[0].buf;
        for (Py_ssize_t i = 0; i < c.in.length; i++)
            hashes[i] = page_hash(page_at(&c.in, i), salt);
        result = Py_NewRef(Py_None);
    }
    release(&c);
    return result;
}

PyDoc_STRVAR(sample_doc,
"sample(pages, threshold, salt, out, mask) -> count\n\n"
"Copy into int64 ``out`` the references whose page hash is below\n"
"``threshold`` (out of 2**24): SHARDS' fixed-rate spatial sample.\n"
"``mask`` (bytes-like or None) caches that test per page for pages below\n"
"its length (see mrc.sample_mask), a byte load instead of a hash.");

static PyObject *
sample(PyObject *Py_UNUSED(self), PyObject *args)
{
    PyObject *pages_obj, *out_obj, *mask_obj, *result = NULL;
    unsigned long threshold;
    unsigned long long salt;
    call_buffers c = {0};
    if (!PyArg_ParseTuple(args, "OkKOO", &pages_obj, &threshold, &salt,
                          &out_obj, &mask_obj) ||
        open_pages(pages_obj, &c.in) < 0)
        return NULL;
    if (open_output(out_obj, &c.out[0], c.in.length, "out", 0) < 0 ||
        (mask_obj != Py_None &&
         PyObject_GetBuffer(mask_obj, &c.out[1], PyBUF_C_CONTIGUOUS) < 0))
        goto done;
    const uint8_t *kept_page = c.out[1].buf;
    uint64_t masked = c.out[1].obj ? (uint64_t)c.out[1].len : 0;
    int64_t *kept = c.out[0].buf;
    Py_ssize_t count = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < c.in.length; i++) {
        uint64_t page = page_at(&c.in, i);
        kept[count] = (int64_t)page;
        count += page < masked ? kept_page[page]
                               : page_hash(page, salt) < threshold;
    }
    Py_END_ALLOW_THREADS
    result = PyLong_FromSsize_t(count);
done:
    release(&c);
    return result;
}

/* ---- Fixed-size SHARDS ----------------------------------------------- */

/* Max-heap of (hash, page) for the sampled pages, so the page with the
 * largest hash is the one evicted when the sample is full. */
typedef struct {
    uint32_t hash;
    int64_t page;
} heap_item;

static void
heap_push(heap_item *heap, int64_t *size, heap_item item)
{
    int64_t i = (*size)++;
    while (i > 0) {
        int64_t parent = (i - 1) / 2;
        if (heap[parent].hash >= item.hash)
            break;
        heap[i] = heap[parent];
        i = parent;
    }
    heap[i] = item;
}

static heap_item
heap_pop(heap_item *heap, int64_t *size)
{
    heap_item top = heap[0], last = heap[--(*size)];
    int64_t i = 0;
    for (;;) {
        int64_t child = 2 * i + 1;
        if (child >= *size)
            break;
        if (child + 1 < *size && heap[child + 1].hash > heap[child].hash)
            child++;
        if (heap[child].hash <= last.hash)
            break;
        heap[i] = heap[child];
        i = child;
    }
    if (*size > 0)
        heap[i] = last;
    return top;
}

PyDoc_STRVAR(shards_fixed_size_doc,
"shards_fixed_size(pages, universe, max_pages, salt, histogram)\n"
"    -> (sampled_references, final_threshold)\n\n"
"SHARDS with a fixed sample size (Waldspurger et al., FAST'15, s_max):\n"
"track at most ``max_pages`` pages, lowering the hash threshold (and\n"
"evicting the pages above it) when a new page would exceed that.\n"
"float64 ``histogram[universe + 1]`` receives each sampled reference at\n"
"its distance scaled by 1/rate (index 0: first touches), in units of the\n"
"final rate: earlier counts are rescaled whenever the rate drops.");

static PyObject *
shards_fixed_size(PyObject *Py_UNUSED(self), PyObject *args)
{
    PyObject *pages_obj, *hist_obj, *result = NULL;
    long long universe, max_pages;
    unsigned long long salt;
    call_buffers c = {0};
    heap_item *heap = NULL;
    lru_stack s = {0};
    if (!PyArg_ParseTuple(args, "OLLKO", &pages_obj, &universe, &max_pages,
                          &salt, &hist_obj) ||
        open_pages(pages_obj, &c.in) < 0)
        return NULL;
    if (max_pages < 1) {
        PyErr_SetString(PyExc_ValueError, "max_pages must be positive");
        goto done;
    }
    if (open_output(hist_obj, &c.out[0], universe + 1, "histogram", 0) < 0 ||
        check_universe(&c.in, universe) < 0)
        goto done;
    heap = malloc((size_t)(max_pages + 1) * sizeof(heap_item));
    if (!heap) {
        PyErr_NoMemory();
        goto done;
    }
    if (stack_init(&s, universe) < 0)
        goto done;
    double *counts = c.out[0].buf;
    int64_t heap_size = 0, sampled = 0;
    uint32_t threshold = HASH_MODULUS;
    /* Counts are kept in units of the current rate: a sampled reference
     * adds ``weight``; when the rate drops from R to R', the rescale
     * SHARDS prescribes (multiply earlier counts by R'/R) is folded into
     * ``weight`` growing by R/R' instead, and undone at the end. */
    double weight = 1.0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < c.in.length; i++) {
        uint64_t page = page_at(&c.in, i);
        uint32_t h = page_hash(page, salt);
        if (h >= threshold)
            continue;
        sampled++;
        int was_tracked = s.last_slot[page] >= 0;
        int64_t d = stack_touch(&s, (int64_t)page);
        double rate = (double)threshold / HASH_MODULUS;
        int64_t scaled = d == 0 ? 0 : (int64_t)((double)d / rate + 0.5);
        counts[scaled > universe ? universe : scaled] += weight;
        if (was_tracked)
            continue;
        heap_push(heap, &heap_size, (heap_item){h, (int64_t)page});
        while (heap_size > max_pages) {
            uint32_t top = heap[0].hash;
            while (heap_size > 0 && heap[0].hash == top)
                stack_forget(&s, heap_pop(heap, &heap_size).page);
            weight *= (double)threshold / top;
            threshold = top;
        }
    }
    for (int64_t k = 0; k <= universe; k++)
        counts[k] /= weight;
    Py_END_ALLOW_THREADS
    result = Py_BuildValue("Lk", (long long)sampled,
                           (unsigned long)threshold);
done:
    stack_free(&s);
    free(heap);
    release(&c);
    return result;
}

/* ---- The hypervisor's ghost buffer ----------------------------------- */

PyDoc_STRVAR(ghost_positions_doc,
"ghost_positions(blocks, reads, universe, positions)\n\n"
"The hypervisor's LRU list of the blocks a VM evicted (a ghost buffer,\n"
"Jones et al.; Lu and Shen section 4.1). Event i puts blocks[i] on top\n"
"when reads[i] (1-byte items) is 0, an admitted eviction; otherwise it\n"
"is an I/O read, which looks the block up and takes it out, as the VM\n"
"now holds it. int64 ``positions[n]`` receives each read's 1-based\n"
"place from the top, 0 when the block is not listed, and -1 for each\n"
"eviction.");

static PyObject *
ghost_positions(PyObject *Py_UNUSED(self), PyObject *args)
{
    PyObject *blocks_obj, *reads_obj, *out_obj, *result = NULL;
    long long universe;
    call_buffers c = {0};
    lru_stack s = {0};
    if (!PyArg_ParseTuple(args, "OOLO", &blocks_obj, &reads_obj, &universe,
                          &out_obj) ||
        open_pages(blocks_obj, &c.in) < 0)
        return NULL;
    if (PyObject_GetBuffer(reads_obj, &c.flags, PyBUF_C_CONTIGUOUS) < 0)
        goto done;
    if (c.flags.itemsize != 1 || c.flags.len != c.in.length) {
        PyErr_SetString(PyExc_ValueError,
                        "reads must hold one byte per block");
        goto done;
    }
    if (open_output(out_obj, &c.out[0], c.in.length, "positions", 0) < 0 ||
        check_universe(&c.in, universe) < 0 || stack_init(&s, universe) < 0)
        goto done;
    const uint8_t *reads = c.flags.buf;
    int64_t *out = c.out[0].buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < c.in.length; i++) {
        int64_t block = (int64_t)page_at(&c.in, i);
        if (!reads[i]) {
            stack_touch(&s, block);
            out[i] = -1;
        } else if (s.last_slot[block] >= 0) {
            out[i] = marks_after(&s, s.last_slot[block]) + 1;
            stack_forget(&s, block);
        } else {
            out[i] = 0;
        }
    }
    Py_END_ALLOW_THREADS
    result = Py_NewRef(Py_None);
done:
    stack_free(&s);
    release(&c);
    return result;
}

static PyMethodDef methods[] = {
    {"stack_distances", stack_distances, METH_VARARGS, stack_distances_doc},
    {"accumulate", accumulate, METH_VARARGS, accumulate_doc},
    {"reuse_times", reuse_times, METH_VARARGS, reuse_times_doc},
    {"page_hashes", page_hashes, METH_VARARGS, page_hashes_doc},
    {"sample", sample, METH_VARARGS, sample_doc},
    {"shards_fixed_size", shards_fixed_size, METH_VARARGS,
     shards_fixed_size_doc},
    {"ghost_positions", ghost_positions, METH_VARARGS, ghost_positions_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "memcanal.estimation._lru",
    "LRU stack distances and SHARDS sampling (see _lru.c).", -1, methods,
};

PyMODINIT_FUNC
PyInit__lru(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m && PyModule_AddIntConstant(m, "HASH_MODULUS", HASH_MODULUS) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
