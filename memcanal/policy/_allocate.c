/*
 * Isolated sharing's two searches in C for memcanal.policy.isolated.
 *
 * Each VM's cost over units k = 0..units is a step function of its miss
 * ratio curve plus a stay preference: cost(k) = step(k) + eps |k - k0|,
 * infinite where the VM may not be. isolated.py describes the steps as
 * runs (the unit each curve point starts at, log relative miss ratio
 * from there, whether that ratio is allowed below the baseline) and the
 * bounds in units; both searches build the same allowed segments from
 * them, so neither needs a cost for every unit:
 *
 * - exact: the knapsack-like dynamic programme of isolated._exact_dense,
 *   with each VM's choices cut to those not dominated by less memory at
 *   no more cost: the start of a segment above the VM's current size,
 *   and the units of a segment below it, where each unit less costs eps
 *   more; those are merged at once with a sliding-window minimum.
 * - greedy: marginal allocation on each VM's lower convex hull: from
 *   every VM's least allowed size, the hull segment that lowers the cost
 *   most per unit is taken whole while one fits and gains, so a step is
 *   crossed at once; then the memory left goes to the allowed size that
 *   gains most within it.
 *
 * Both release the GIL while they search.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#define GAIN 1e-12      /* what counts as a gain, as in isolated.py */
#define SHORT 8         /* descending segments merged unit by unit */
#define TARGETS 4       /* hull corners above a VM an exchange tries */
#define ROUNDS 2        /* exchanges per VM at most */

typedef struct {
    int64_t a, b;
    double s;
} segment;

typedef struct {
    const int64_t *starts;
    const double *steps;
    const uint8_t *below_ok;
    const int64_t *offsets, *lo, *hi, *base, *current;
    Py_ssize_t vms;
    int64_t units;
    double eps;
} problem;

static double
cost(const problem *p, Py_ssize_t vm, double step, int64_t k)
{
    int64_t moved = k - p->current[vm];
    return step + p->eps * (double)(moved < 0 ? -moved : moved);
}

static void
push(segment *out, Py_ssize_t *count, int64_t a, int64_t b, double s)
{
    if (a > b)
        return;
    segment *last = *count ? &out[*count - 1] : NULL;
    if (last && last->b + 1 == a && last->s == s) {
        last->b = b;
        return;
    }
    out[(*count)++] = (segment){a, b, s};
}

/* The VM's allowed units as segments of one step each, ascending, at
 * most one per run: below the baseline a run is allowed whole or not. */
static Py_ssize_t
segments(const problem *p, Py_ssize_t vm, segment *out)
{
    Py_ssize_t count = 0;
    int64_t lo = p->lo[vm] < 0 ? 0 : p->lo[vm];
    int64_t hi = p->hi[vm] > p->units ? p->units : p->hi[vm];
    int64_t base = p->base[vm];
    for (int64_t j = p->offsets[vm]; j < p->offsets[vm + 1]; j++) {
        int64_t a = p->starts[j];
        int64_t b = (j + 1 < p->offsets[vm + 1] ? p->starts[j + 1]
                     : p->units + 1) - 1;
        if (a < lo)
            a = lo;
        if (b > hi)
            b = hi;
        if (a > b)
            continue;
        if (p->below_ok[j])
            push(out, &count, a, b, p->steps[j]);
        else
            push(out, &count, a > base ? a : base, b, p->steps[j]);
    }
    return count;
}

static Py_ssize_t
max_segments(const problem *p)
{
    Py_ssize_t most = 0;
    for (Py_ssize_t vm = 0; vm < p->vms; vm++) {
        Py_ssize_t runs = p->offsets[vm + 1] - p->offsets[vm];
        if (runs > most)
            most = runs;
    }
    return most;
}

/* The dynamic programme's tables: a row per VM merged of the least cost
 * of each number of units taken so far, finite between first and last;
 * cap leaves the VMs still to merge their least units. Rows, not
 * choices, are kept: a merge is then a plain minimum the compiler
 * vectorises, and the choices are found again going back. */
typedef struct {
    double *rows, *window_cost;
    int64_t *window, first, last, cap;
} tables;

/* A VM's choices: units from..to of one step (one unit, or units below
 * its current size, each unit less costing eps more). */
typedef struct {
    int64_t from, to;
    double s;
} piece;

static void
point(tables *t, const double *best, double *next, int64_t k, double c,
      int64_t *reach)
{
    int64_t stop = t->last + k > t->cap ? t->cap : t->last + k;
    const double *from = best - k;
    for (int64_t u = t->first + k; u <= stop; u++) {
        double v = from[u] + c;
        next[u] = v < next[u] ? v : next[u];
    }
    if (stop > *reach)
        *reach = stop;
}

/* Units a..e below the VM's current size: next[u] = min over k of
 * best[u - k] + cost(k), the minimum of best[j] + eps j over a window
 * of j that slides with u. */
static void
descending(const problem *p, tables *t, Py_ssize_t vm, const double *best,
           double *next, const piece *own, int64_t *reach)
{
    int64_t a = own->from, e = own->to;
    if (e - a < SHORT) {
        for (int64_t k = a; k <= e; k++)
            point(t, best, next, k, cost(p, vm, own->s, k), reach);
        return;
    }
    int64_t stop = t->last + e > t->cap ? t->cap : t->last + e;
    int64_t head = 0, tail = 0;
    for (int64_t u = t->first + a; u <= stop; u++) {
        int64_t j = u - a;
        if (j <= t->last) {
            double g = best[j] + p->eps * (double)j;
            while (tail > head && t->window_cost[tail - 1] >= g)
                tail--;
            t->window[tail] = j;
            t->window_cost[tail++] = g;
        }
        while (t->window[head] < u - e)
            head++;
        j = t->window[head];
        double v = best[j] + cost(p, vm, own->s, u - j);
        next[u] = v < next[u] ? v : next[u];
    }
    if (stop > *reach)
        *reach = stop;
}

/* The VM's pieces, ascending: of each segment the units that no smaller
 * unit beats (costs no more with less memory). */
static Py_ssize_t
pieces(const problem *p, Py_ssize_t vm, const segment *segs,
       Py_ssize_t count, piece *out)
{
    Py_ssize_t made = 0;
    int64_t k0 = p->current[vm];
    double cheapest = INFINITY;
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t a = segs[i].a, e = segs[i].b < k0 ? segs[i].b : k0;
        double s = segs[i].s;
        if (a >= k0)
            e = a;
        if (!(cost(p, vm, s, e) < cheapest))
            continue;
        /* The first unit cheaper than any before it. */
        int64_t from = a, to = e;
        while (from < to) {
            int64_t mid = from + (to - from) / 2;
            if (cost(p, vm, s, mid) < cheapest)
                to = mid;
            else
                from = mid + 1;
        }
        out[made++] = (piece){from, e, s};
        cheapest = cost(p, vm, s, e);
    }
    return made;
}

static int
exact_search(const problem *p, segment *segs, piece *own, Py_ssize_t stride,
             Py_ssize_t *counts, tables *t, int64_t *taken)
{
    int64_t width = p->units + 1;
    t->cap = p->units;
    for (Py_ssize_t vm = 0; vm < p->vms; vm++) {
        Py_ssize_t n = segments(p, vm, segs);
        if (!n)
            return 0;
        counts[vm] = pieces(p, vm, segs, n, own + vm * stride);
        t->cap -= own[vm * stride].from;
    }
    for (int64_t u = 0; u < width * (p->vms + 1); u++)
        t->rows[u] = INFINITY;
    t->rows[0] = 0.0;
    t->first = t->last = 0;
    for (Py_ssize_t vm = 0; vm < p->vms; vm++) {
        const double *best = t->rows + vm * width;
        double *next = t->rows + (vm + 1) * width;
        const piece *mine = own + vm * stride;
        int64_t reach = -1;
        t->cap += mine[0].from;
        if (t->first + mine[0].from > t->cap)
            return 0;
        for (Py_ssize_t i = 0; i < counts[vm]; i++) {
            if (mine[i].from == mine[i].to)
                point(t, best, next, mine[i].from,
                      cost(p, vm, mine[i].s, mine[i].from), &reach);
            else
                descending(p, t, vm, best, next, &mine[i], &reach);
        }
        t->first += mine[0].from;
        t->last = reach;
    }
    const double *best = t->rows + p->vms * width;
    double least = INFINITY;
    for (int64_t u = t->first; u <= t->last; u++)
        if (best[u] < least)
            least = best[u];
    if (!isfinite(least))
        return 0;
    /* The most memory among the best: what lowers nobody's misses still
     * serves the VMs better than the host's free list. */
    int64_t left = t->first;
    for (int64_t u = t->first; u <= t->last; u++)
        if (best[u] <= least + GAIN)
            left = u;
    /* Back through the rows: each VM's fewest units that reach the cost
     * its row has there. */
    for (Py_ssize_t vm = p->vms - 1; vm >= 0; vm--) {
        const double *prev = t->rows + vm * width;
        double want = t->rows[(vm + 1) * width + left], miss = INFINITY;
        const piece *mine = own + vm * stride;
        taken[vm] = mine[0].from;
        for (Py_ssize_t i = 0; i < counts[vm] && miss > 0; i++)
            for (int64_t k = mine[i].from; k <= mine[i].to && k <= left;
                 k++) {
                double off = fabs(prev[left - k]
                                  + cost(p, vm, mine[i].s, k) - want);
                if (off < miss) {
                    miss = off;
                    taken[vm] = k;
                    if (!miss)
                        break;
                }
            }
        left -= taken[vm];
    }
    return 1;
}

static int
exact(const problem *p, int64_t *taken)
{
    int64_t width = p->units + 1;
    Py_ssize_t stride = max_segments(p) + 1;
    tables t = {
        malloc((size_t)(p->vms + 1) * width * sizeof(double)),
        malloc(width * sizeof(double)), malloc(width * sizeof(int64_t)),
        0, 0, 0,
    };
    segment *segs = malloc(stride * sizeof(segment));
    piece *own = malloc((size_t)p->vms * stride * sizeof(piece));
    Py_ssize_t *counts = malloc((size_t)p->vms * sizeof(Py_ssize_t));
    int found = -1;
    if (t.rows && t.window_cost && t.window && segs && own && counts)
        found = exact_search(p, segs, own, stride, counts, &t, taken);
    free(t.rows);
    free(t.window_cost);
    free(t.window);
    free(segs);
    free(own);
    free(counts);
    return found;
}

typedef struct {
    int64_t k;
    double c;
} vertex;

/* The lower convex hull of the VM's cost: only a segment's first unit,
 * last unit and the unit nearest the current size can be its corners. */
static Py_ssize_t
hull(const problem *p, Py_ssize_t vm, const segment *segs, Py_ssize_t count,
     vertex *out)
{
    Py_ssize_t size = 0;
    int64_t k0 = p->current[vm];
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t near = k0 < segs[i].a ? segs[i].a
            : k0 > segs[i].b ? segs[i].b : k0;
        int64_t ks[3] = {segs[i].a, near, segs[i].b};
        for (int n = 0; n < 3; n++) {
            if (n && ks[n] == ks[n - 1])
                continue;
            vertex v = {ks[n], cost(p, vm, segs[i].s, ks[n])};
            while (size >= 2) {
                vertex o = out[size - 2], m = out[size - 1];
                double turn = (double)(m.k - o.k) * (v.c - o.c)
                    - (m.c - o.c) * (double)(v.k - o.k);
                if (turn > 0)
                    break;
                size--;
            }
            out[size++] = v;
        }
    }
    return size;
}

/* The best allowed unit in (from, from + spare] and what it gains. */
static double
best_within(const problem *p, Py_ssize_t vm, const segment *segs,
            Py_ssize_t count, int64_t from, int64_t spare, int64_t *to)
{
    double here = INFINITY, gain = 0.0;
    int64_t k0 = p->current[vm];
    for (Py_ssize_t i = 0; i < count; i++)
        if (segs[i].a <= from && from <= segs[i].b)
            here = cost(p, vm, segs[i].s, from);
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t a = segs[i].a > from + 1 ? segs[i].a : from + 1;
        int64_t b = segs[i].b < from + spare ? segs[i].b : from + spare;
        if (a > b)
            continue;
        int64_t k = k0 < a ? a : k0 > b ? b : k0;
        double g = cost(p, vm, segs[i].s, k) - here;
        if (g < gain) {
            gain = g;
            *to = k;
        }
    }
    return gain;
}

/* The segment holding unit k: the last starting at or before it (-1 if
 * none; it may end before k). */
static Py_ssize_t
holding(const segment *segs, Py_ssize_t count, int64_t k)
{
    Py_ssize_t from = 0, to = count;
    while (from < to) {
        Py_ssize_t mid = from + (to - from) / 2;
        if (segs[mid].a <= k)
            from = mid + 1;
        else
            to = mid;
    }
    return from - 1;
}

static int64_t
nearest(int64_t k, int64_t a, int64_t b)
{
    return k < a ? a : k > b ? b : k;
}

/* The VM's searches: its segments, hull corners, and the cheapest unit
 * of its first segments (cheapest[i] over segments 0..i). */
typedef struct {
    segment *segs;
    vertex *corners, *cheapest;
    Py_ssize_t nsegs, ncorners, at;
} shape;

/* The cheapest allowed unit at most ``most`` and its cost; -1 if none. */
static int64_t
cheapest_upto(const problem *p, Py_ssize_t vm, const shape *v, int64_t most,
              double *c)
{
    Py_ssize_t i = holding(v->segs, v->nsegs, most);
    if (i < 0)
        return -1;
    int64_t b = v->segs[i].b < most ? v->segs[i].b : most;
    int64_t k = nearest(p->current[vm], v->segs[i].a, b);
    *c = cost(p, vm, v->segs[i].s, k);
    if (i > 0 && v->cheapest[i - 1].c <= *c) {
        *c = v->cheapest[i - 1].c;
        return v->cheapest[i - 1].k;
    }
    return k;
}

/* Spare memory to the allowed units that gain most within it. */
static void
fill(const problem *p, shape *shapes, int64_t *taken, int64_t *spare)
{
    while (*spare > 0) {
        Py_ssize_t pick = -1;
        int64_t to = 0, best_to = 0;
        double most = -GAIN;
        for (Py_ssize_t vm = 0; vm < p->vms; vm++) {
            double gain = best_within(p, vm, shapes[vm].segs,
                                      shapes[vm].nsegs, taken[vm], *spare,
                                      &to);
            if (gain < most) {
                most = gain;
                pick = vm;
                best_to = to;
            }
        }
        if (pick < 0)
            return;
        *spare -= best_to - taken[pick];
        taken[pick] = best_to;
    }
}

/* The one move of two VMs that gains most, if any gains: one up to one
 * of its next hull corners, where no spare memory reaches, the other
 * down to its cheapest unit that leaves room for it. What a hull
 * allocation misses is a step too wide for what is left; this takes the
 * memory for it from the VM that loses least by giving it. */
static int
exchange(const problem *p, shape *shapes, int64_t *taken, double *here,
         int64_t *spare)
{
    Py_ssize_t up = -1, down = -1;
    int64_t up_to = 0, down_to = 0;
    double most = -GAIN;
    for (Py_ssize_t vm = 0; vm < p->vms; vm++) {
        const shape *v = &shapes[vm];
        here[vm] = cost(p, vm, v->segs[holding(v->segs, v->nsegs,
                                               taken[vm])].s, taken[vm]);
    }
    for (Py_ssize_t vm = 0; vm < p->vms; vm++) {
        const shape *v = &shapes[vm];
        int corners = 0, starts = 0;
        Py_ssize_t next = holding(v->segs, v->nsegs, taken[vm]) + 1;
        for (Py_ssize_t i = 0; i < v->ncorners + v->nsegs; i++) {
            /* Its next hull corners, then the next steps of its curve. */
            vertex to = v->corners[i < v->ncorners ? i : 0];
            if (i < v->ncorners) {
                if (to.k <= taken[vm] || corners++ >= TARGETS)
                    continue;
            } else {
                Py_ssize_t step = next + i - v->ncorners;
                if (step >= v->nsegs || starts++ >= TARGETS * 4)
                    break;
                to.k = v->segs[step].a;
                to.c = cost(p, vm, v->segs[step].s, to.k);
            }
            int64_t need = to.k - taken[vm] - *spare;
            double gain = to.c - here[vm];
            if (need <= 0 || !(gain < -GAIN))
                continue;
            for (Py_ssize_t other = 0; other < p->vms; other++) {
                double c;
                if (other == vm || taken[other] < need)
                    continue;
                int64_t k = cheapest_upto(p, other, &shapes[other],
                                          taken[other] - need, &c);
                if (k >= 0 && gain + c - here[other] < most) {
                    most = gain + c - here[other];
                    up = vm, up_to = to.k, down = other, down_to = k;
                }
            }
        }
    }
    if (up < 0)
        return 0;
    *spare += taken[down] - down_to - (up_to - taken[up]);
    taken[up] = up_to;
    taken[down] = down_to;
    return 1;
}

static int
greedy_search(const problem *p, shape *shapes, double *here, int64_t *taken)
{
    int64_t spare = p->units;
    for (Py_ssize_t vm = 0; vm < p->vms; vm++) {
        shape *v = &shapes[vm];
        v->nsegs = segments(p, vm, v->segs);
        if (!v->nsegs)
            return 0;
        v->ncorners = hull(p, vm, v->segs, v->nsegs, v->corners);
        for (Py_ssize_t i = 0; i < v->nsegs; i++) {
            int64_t k = nearest(p->current[vm], v->segs[i].a, v->segs[i].b);
            vertex own = {k, cost(p, vm, v->segs[i].s, k)};
            v->cheapest[i] = i && v->cheapest[i - 1].c <= own.c
                ? v->cheapest[i - 1] : own;
        }
        v->at = 0;
        taken[vm] = v->segs[0].a;
        spare -= taken[vm];
    }
    if (spare < 0)
        return 0;
    for (;;) {
        Py_ssize_t pick = -1;
        double steepest = 0.0;
        for (Py_ssize_t vm = 0; vm < p->vms; vm++) {
            shape *v = &shapes[vm];
            if (v->at + 1 >= v->ncorners)
                continue;
            vertex *c = v->corners + v->at;
            if (c[1].k - c[0].k > spare || !(c[1].c - c[0].c < -GAIN)) {
                /* Memory only shrinks, gains only fall along a hull. */
                v->at = v->ncorners;
                continue;
            }
            double slope = (c[1].c - c[0].c) / (double)(c[1].k - c[0].k);
            if (slope < steepest) {
                steepest = slope;
                pick = vm;
            }
        }
        if (pick < 0)
            break;
        vertex *c = shapes[pick].corners + ++shapes[pick].at;
        spare -= c->k - taken[pick];
        taken[pick] = c->k;
    }
    fill(p, shapes, taken, &spare);
    for (Py_ssize_t round = 0; round < ROUNDS * p->vms; round++) {
        if (!exchange(p, shapes, taken, here, &spare))
            break;
        fill(p, shapes, taken, &spare);
    }
    return 1;
}

static int
greedy(const problem *p, int64_t *taken)
{
    /* A segment per run at most, three corners per segment. */
    Py_ssize_t stride = 3 * max_segments(p) + 1;
    segment *segs = malloc((size_t)p->vms * stride * sizeof(segment));
    vertex *corners = malloc(2 * (size_t)p->vms * stride * sizeof(vertex));
    shape *shapes = malloc((size_t)p->vms * sizeof(shape));
    double *here = malloc((size_t)p->vms * sizeof(double));
    int found = -1;
    if (segs && corners && shapes && here) {
        for (Py_ssize_t vm = 0; vm < p->vms; vm++)
            shapes[vm] = (shape){segs + vm * stride, corners + vm * stride,
                                 corners + (p->vms + vm) * stride, 0, 0, 0};
        found = greedy_search(p, shapes, here, taken);
    }
    free(segs);
    free(corners);
    free(shapes);
    free(here);
    return found;
}

static int
buffer_of(Py_buffer *view, Py_ssize_t itemsize, Py_ssize_t length,
          const char *name)
{
    if (view->len != itemsize * length) {
        PyErr_Format(PyExc_ValueError, "%s has %zd bytes, not %zd", name,
                     view->len, itemsize * length);
        return -1;
    }
    return 0;
}

static PyObject *
search(PyObject *args, int (*method)(const problem *, int64_t *))
{
    Py_buffer views[8] = {{0}};
    long long units;
    double eps;
    PyObject *result = NULL;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*y*y*Ld", &views[0], &views[1],
                          &views[2], &views[3], &views[4], &views[5],
                          &views[6], &views[7], &units, &eps))
        return NULL;
    Py_ssize_t vms = views[3].len / 8 - 1, runs = views[0].len / 8;
    problem p = {
        views[0].buf, views[1].buf, views[2].buf, views[3].buf,
        views[4].buf, views[5].buf, views[6].buf, views[7].buf,
        vms, units, eps,
    };
    int64_t *taken = NULL;
    if (vms < 0 || units < 0 || units >= INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "bad number of VMs or units");
        goto done;
    }
    if (buffer_of(&views[1], 8, runs, "steps") < 0
            || buffer_of(&views[2], 1, runs, "below_ok") < 0)
        goto done;
    for (int i = 4; i < 8; i++)
        if (buffer_of(&views[i], 8, vms, "a bound") < 0)
            goto done;
    for (Py_ssize_t vm = 0; vm < vms; vm++)
        if (p.offsets[vm] < 0 || p.offsets[vm] > p.offsets[vm + 1]
                || p.offsets[vm + 1] > runs) {
            PyErr_SetString(PyExc_ValueError, "offsets out of order");
            goto done;
        }
    taken = malloc((vms + 1) * sizeof(int64_t));
    if (!taken) {
        PyErr_NoMemory();
        goto done;
    }
    int found;
    Py_BEGIN_ALLOW_THREADS
    found = vms ? method(&p, taken) : 1;
    Py_END_ALLOW_THREADS
    if (found < 0) {
        PyErr_NoMemory();
    } else if (!found) {
        result = Py_NewRef(Py_None);
    } else if ((result = PyList_New(vms))) {
        for (Py_ssize_t vm = 0; vm < vms; vm++)
            PyList_SET_ITEM(result, vm, PyLong_FromLongLong(taken[vm]));
    }
done:
    free(taken);
    for (int i = 0; i < 8; i++)
        if (views[i].obj)
            PyBuffer_Release(&views[i]);
    return result;
}

PyDoc_STRVAR(exact_doc,
"exact(starts, steps, below_ok, offsets, lo, hi, base, current, units, eps)\n"
"\n"
"Units per VM of least summed cost within ``units`` (the most units among\n"
"equal costs), or None if no allocation is allowed. VM i's runs are\n"
"starts/steps/below_ok[offsets[i]:offsets[i + 1]]: the first unit of\n"
"each (int64, ascending), its log relative miss ratio (float64), and\n"
"whether that ratio is allowed below the baseline (uint8). lo, hi, base\n"
"and current (int64 per VM) are its least and most units, its first\n"
"unit at or above the baseline and its current units; eps the cost of\n"
"each unit moved.");

static PyObject *
exact_method(PyObject *self, PyObject *args)
{
    return search(args, exact);
}

PyDoc_STRVAR(greedy_doc,
"greedy(starts, steps, below_ok, offsets, lo, hi, base, current, units, eps)\n"
"\n"
"Units per VM by marginal allocation on the lower convex hulls of their\n"
"costs (arguments as for exact), or None if no allocation is allowed.");

static PyObject *
greedy_method(PyObject *self, PyObject *args)
{
    return search(args, greedy);
}

static PyMethodDef methods[] = {
    {"exact", exact_method, METH_VARARGS, exact_doc},
    {"greedy", greedy_method, METH_VARARGS, greedy_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "memcanal.policy._allocate",
    "Isolated sharing's exact and greedy searches (see _allocate.c).", -1,
    methods,
};

PyMODINIT_FUNC
PyInit__allocate(void)
{
    return PyModule_Create(&module);
}
