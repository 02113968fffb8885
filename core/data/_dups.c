/* Exact duplicates and conflicting outputs from the lint's fingerprints, in C (part of the `_fastcols`
 * extension; core/dataset/fingerprints.py calls it when the fingerprints are all in memory).
 *
 * duplicates(parts) takes a sequence of (lines, prompts, outputs, delta): three buffers of int64 of the
 * same length (one row each: line number, hash of the prompt side, hash of the output) and an int
 * added to that part's line numbers. It returns (dup_lines, dup_of, conflict_lines, conflict_with),
 * four bytes objects of int64, in line order:
 *   - a row is a duplicate of the first earlier row with the same prompt and output;
 *   - a row that is not a duplicate conflicts with the first row with its prompt when their outputs
 *     differ.
 * These are the results of fingerprints._find_with_dicts (the reference the tests compare with).
 *
 * How: only rows whose prompt hash repeats can be either. An LSD radix sort of the prompt hashes'
 * top 33 bits (the low bits hold the row index) puts repeats side by side in three passes over the
 * rows; the rows next to an equal neighbour are the candidates (a few more than the repeated
 * prompts: the low bits are not compared). The candidates, sorted by line, then go through two small
 * hash tables as the dict reference does: (prompt, output) -> first line, prompt -> (first line,
 * first output).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int64_t line, prompt, output;
} Row;

typedef struct {
    Py_buffer cols[3];
    int64_t delta;
    Py_ssize_t n;
} Part;

#define DIGIT_BITS 8
#define DIGITS (1 << DIGIT_BITS)
#define PASSES 4
#define SORT_LOW (64 - PASSES * DIGIT_BITS) /* the keys are sorted by their top 33 bits */

/* Sorts keys by their top PASSES * DIGIT_BITS bits (LSD: one counting sweep for all the digits, then one
 * scatter a digit, skipped when every key has the same digit); returns the buffer (keys or tmp) that
 * holds the result, or NULL when out of memory. */
static uint64_t *
radix_sort_top(uint64_t *keys, uint64_t *tmp, size_t n)
{
    size_t *count = PyMem_Calloc((size_t)PASSES * DIGITS, sizeof(size_t));
    if (count == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++)
        for (int d = 0; d < PASSES; d++)
            count[d * DIGITS + ((keys[i] >> (SORT_LOW + d * DIGIT_BITS)) & (DIGITS - 1))]++;
    for (int d = 0; d < PASSES; d++) {
        size_t *c = count + d * DIGITS;
        int shift = SORT_LOW + d * DIGIT_BITS;
        if (c[(keys[0] >> shift) & (DIGITS - 1)] == n)
            continue;
        size_t sum = 0;
        for (int v = 0; v < DIGITS; v++) {
            size_t k = c[v];
            c[v] = sum;
            sum += k;
        }
        for (size_t i = 0; i < n; i++)
            tmp[c[(keys[i] >> shift) & (DIGITS - 1)]++] = keys[i];
        uint64_t *t = keys;
        keys = tmp;
        tmp = t;
    }
    PyMem_Free(count);
    return keys;
}

static int
by_line(const void *a, const void *b)
{
    int64_t x = ((const Row *)a)->line, y = ((const Row *)b)->line;
    return (x > y) - (x < y);
}

static inline size_t
mix(uint64_t x, int shift)
{
    return (size_t)((x * 0x9E3779B97F4A7C15ull) >> shift);
}

static void
release(Part *parts, Py_ssize_t count)
{
    for (Py_ssize_t p = 0; p < count; p++)
        for (int c = 0; c < 3; c++)
            if (parts[p].cols[c].obj != NULL)
                PyBuffer_Release(&parts[p].cols[c]);
    PyMem_Free(parts);
}

/* Reads the (lines, prompts, outputs, delta) tuples; fills parts[] and returns the total row count,
 * or -1 with an exception set. */
static Py_ssize_t
read_parts(PyObject *seq, Part *parts, Py_ssize_t count)
{
    Py_ssize_t total = 0;
    for (Py_ssize_t p = 0; p < count; p++) {
        PyObject *item = PySequence_Fast_GET_ITEM(seq, p);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 4) {
            PyErr_SetString(PyExc_TypeError, "duplicates: each part is (lines, prompts, outputs, delta)");
            return -1;
        }
        for (int c = 0; c < 3; c++) {
            if (PyObject_GetBuffer(PyTuple_GET_ITEM(item, c), &parts[p].cols[c], PyBUF_C_CONTIGUOUS) < 0)
                return -1;
            if (parts[p].cols[c].itemsize != 8 || parts[p].cols[c].len != parts[p].cols[0].len) {
                PyErr_SetString(PyExc_ValueError, "duplicates: three int64 columns of one length");
                return -1;
            }
        }
        parts[p].delta = PyLong_AsLongLong(PyTuple_GET_ITEM(item, 3));
        if (parts[p].delta == -1 && PyErr_Occurred())
            return -1;
        parts[p].n = parts[p].cols[0].len / 8;
        total += parts[p].n;
    }
    return total;
}

/* The candidate rows (prompt hash seen at least twice, give or take the bits not compared), in line
 * order. Each key is the prompt hash's top 33 bits over the row index (n < 2^31 rows); two rows whose
 * top 33 bits agree although their hashes differ are a few more candidates (~n^2 / 2^34 of them),
 * which group() sorts out exactly. */
static Row *
candidates(Part *parts, Py_ssize_t count, size_t n, size_t *found)
{
    const uint64_t top = ~(((uint64_t)1 << SORT_LOW) - 1), low = ((uint64_t)1 << SORT_LOW) - 1;
    uint64_t *keys = PyMem_Malloc(n * sizeof(uint64_t));
    uint64_t *tmp = PyMem_Malloc(n * sizeof(uint64_t));
    unsigned char *pick = PyMem_Calloc(n, 1);
    Row *rows = NULL;
    *found = 0;
    if (keys == NULL || tmp == NULL || pick == NULL)
        goto done;
    size_t i = 0;
    for (Py_ssize_t p = 0; p < count; p++) {
        const uint64_t *prompts = parts[p].cols[1].buf;
        for (Py_ssize_t j = 0; j < parts[p].n; j++, i++)
            keys[i] = (prompts[j] & top) | i;
    }
    uint64_t *sorted = radix_sort_top(keys, tmp, n);
    if (sorted == NULL)
        goto done;
    size_t m = 0;
    for (i = 1; i < n; i++) {
        if ((sorted[i] & top) == (sorted[i - 1] & top)) {
            m += !pick[sorted[i - 1] & low] + !pick[sorted[i] & low];
            pick[sorted[i - 1] & low] = pick[sorted[i] & low] = 1;
        }
    }
    rows = PyMem_Malloc((m ? m : 1) * sizeof(Row));
    if (rows == NULL)
        goto done;
    i = 0;
    for (Py_ssize_t p = 0; p < count; p++) {
        const int64_t *lines = parts[p].cols[0].buf, *prompts = parts[p].cols[1].buf,
                      *outputs = parts[p].cols[2].buf;
        for (Py_ssize_t j = 0; j < parts[p].n; j++, i++)
            if (pick[i])
                rows[(*found)++] = (Row){lines[j] + parts[p].delta, prompts[j], outputs[j]};
    }
    qsort(rows, *found, sizeof(Row), by_line);
done:
    PyMem_Free(keys);
    PyMem_Free(tmp);
    PyMem_Free(pick);
    if (rows == NULL)
        PyErr_NoMemory();
    return rows;
}

typedef struct {
    int64_t prompt, output, line;
    unsigned char used;
} Slot;

/* Duplicates and conflicts among the candidates (in line order), as the dict reference finds them. */
static PyObject *
group(const Row *rows, size_t m)
{
    int log2 = 4;
    while (((size_t)1 << log2) < 2 * m)
        log2++;
    size_t cap = (size_t)1 << log2, mask = cap - 1;
    int shift = 64 - log2;
    Slot *pairs = PyMem_Calloc(cap, sizeof(Slot)), *prompts = PyMem_Calloc(cap, sizeof(Slot));
    int64_t *out = PyMem_Malloc((4 * m + 1) * sizeof(int64_t));
    PyObject *result = NULL;
    if (pairs == NULL || prompts == NULL || out == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    int64_t *dup_lines = out, *dup_of = out + m, *con_lines = out + 2 * m, *con_with = out + 3 * m;
    size_t dups = 0, cons = 0;
    for (size_t r = 0; r < m; r++) {
        const Row *row = &rows[r];
        size_t s = mix((uint64_t)row->prompt ^ ((uint64_t)row->output * 0xC2B2AE3D27D4EB4Full), shift);
        while (pairs[s].used && (pairs[s].prompt != row->prompt || pairs[s].output != row->output))
            s = (s + 1) & mask;
        if (pairs[s].used) {
            dup_lines[dups] = row->line;
            dup_of[dups++] = pairs[s].line;
            continue;
        }
        pairs[s] = (Slot){row->prompt, row->output, row->line, 1};
        s = mix((uint64_t)row->prompt, shift);
        while (prompts[s].used && prompts[s].prompt != row->prompt)
            s = (s + 1) & mask;
        if (!prompts[s].used)
            prompts[s] = (Slot){row->prompt, row->output, row->line, 1};
        else if (prompts[s].output != row->output) {
            con_lines[cons] = row->line;
            con_with[cons++] = prompts[s].line;
        }
    }
    result = Py_BuildValue("(y#y#y#y#)", (const char *)dup_lines, (Py_ssize_t)(dups * 8),
                           (const char *)dup_of, (Py_ssize_t)(dups * 8), (const char *)con_lines,
                           (Py_ssize_t)(cons * 8), (const char *)con_with, (Py_ssize_t)(cons * 8));
done:
    PyMem_Free(pairs);
    PyMem_Free(prompts);
    PyMem_Free(out);
    return result;
}

PyObject *
fastcols_duplicates(PyObject *self, PyObject *arg)
{
    PyObject *seq = PySequence_Fast(arg, "duplicates: a sequence of parts");
    if (seq == NULL)
        return NULL;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
    Part *parts = PyMem_Calloc(count ? count : 1, sizeof(Part));
    PyObject *result = NULL;
    if (parts == NULL) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    Py_ssize_t n = read_parts(seq, parts, count);
    if (n >= ((Py_ssize_t)1 << SORT_LOW) - 1) {
        PyErr_SetString(PyExc_OverflowError, "duplicates: more than 2^31 rows");
        n = -1;
    }
    if (n >= 0) {
        size_t m = 0;
        Row *rows = n >= 2 ? candidates(parts, count, (size_t)n, &m) : PyMem_Malloc(sizeof(Row));
        if (rows != NULL)
            result = group(rows, m);
        else if (!PyErr_Occurred())
            PyErr_NoMemory();
        PyMem_Free(rows);
    }
    release(parts, count);
    Py_DECREF(seq);
    return result;
}
