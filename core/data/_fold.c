/* The per-block arithmetic of the lint fast path in C (part of the `_fastcols` extension), so that a
 * lint with the extension needs no numpy: core/dataset/hotloop.py (_CFold) and stats.py call these.
 *
 * fold(table, k, escaped, starts, ends, key_overhead, cutoff, h_ins, h_inp, h_out, h_tokens)
 *   table: the int64 columns `columns()` returned for a block of k rows; starts/ends: the int64 line
 *   bounds `scan_lines()` returned. For each row: characters = the three lengths; non-ASCII characters
 *   = the exact count (escaped files) or (raw length - key_overhead - characters) >> 1, at least 0;
 *   tokens = ((characters - non-ASCII + 3) >> 2) + non-ASCII + 8 (stats.estimate_tokens). Adds each
 *   length and the tokens to the histograms' exact counts (writable int64 buffers of EXACT_CAP
 *   entries) and returns (en, zh, too_long, big): rows with no non-ASCII character, rows where they are
 *   more than half, [(row, tokens)] for tokens > cutoff (cutoff < 0: none), and [(histogram, value)]
 *   for values >= EXACT_CAP (the caller adds those to the histogram's sparse part).
 * arange(start, k) -> bytes of int64 start, start + 1, ..., start + k - 1
 * add_into(dst, src): dst[i] += src[i] over two int64 buffers of one length
 *
 * The numpy and pure-Python folds in hotloop.py compute the same; the tests compare them.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#define EXACT_CAP 8192
#define TEMPLATE_OVERHEAD 8

static int
int64_buffer(PyObject *obj, Py_buffer *view, int writable, Py_ssize_t at_least, const char *what)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)) < 0)
        return -1;
    if ((view->itemsize != 8 && view->itemsize != 1) || view->len % 8) {
        PyErr_Format(PyExc_ValueError, "%s: an int64 buffer", what);
        PyBuffer_Release(view);
        return -1;
    }
    if (view->len / 8 < at_least) {
        PyErr_Format(PyExc_ValueError, "%s: %zd values, %zd needed", what, view->len / 8, at_least);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static int
append_pair(PyObject *list, long long a, long long b)
{
    PyObject *pair = Py_BuildValue("(LL)", a, b);
    if (pair == NULL)
        return -1;
    int rc = PyList_Append(list, pair);
    Py_DECREF(pair);
    return rc;
}

PyObject *
fastcols_fold(PyObject *self, PyObject *args)
{
    PyObject *table_obj, *starts_obj, *ends_obj, *hist_obj[4];
    Py_ssize_t k;
    int escaped;
    long long key_overhead, cutoff;
    if (!PyArg_ParseTuple(args, "OnpOOLLOOOO", &table_obj, &k, &escaped, &starts_obj, &ends_obj,
                          &key_overhead, &cutoff, &hist_obj[0], &hist_obj[1], &hist_obj[2], &hist_obj[3]))
        return NULL;
    if (k < 0)
        return PyErr_Format(PyExc_ValueError, "fold: k = %zd", k);
    Py_buffer table = {0}, starts = {0}, ends = {0}, hists[4] = {{0}};
    PyObject *too_long = NULL, *big = NULL, *result = NULL;
    int got = 0;
    if (int64_buffer(table_obj, &table, 0, k * (escaped ? 7 : 6), "fold table") < 0)
        goto done;
    got = 1;
    if (int64_buffer(starts_obj, &starts, 0, k, "fold starts") < 0)
        goto done;
    got = 2;
    if (int64_buffer(ends_obj, &ends, 0, k, "fold ends") < 0)
        goto done;
    got = 3;
    for (int h = 0; h < 4; h++, got++)
        if (int64_buffer(hist_obj[h], &hists[h], 1, EXACT_CAP, "fold histogram") < 0)
            goto done;
    too_long = PyList_New(0);
    big = PyList_New(0);
    if (too_long == NULL || big == NULL)
        goto done;
    const int64_t *t = table.buf, *s = starts.buf, *e = ends.buf;
    int64_t *ex[4] = {hists[0].buf, hists[1].buf, hists[2].buf, hists[3].buf};
    long long en = 0, zh = 0;
    for (Py_ssize_t i = 0; i < k; i++) {
        int64_t v[4] = {t[i], t[k + i], t[2 * k + i], 0};
        int64_t chars = v[0] + v[1] + v[2], cjk;
        if (escaped)
            cjk = t[6 * k + i];
        else {
            cjk = (e[i] - s[i] - key_overhead - chars) >> 1;
            if (cjk < 0)
                cjk = 0;
        }
        v[3] = ((chars - cjk + 3) >> 2) + cjk + TEMPLATE_OVERHEAD;
        for (int h = 0; h < 4; h++) {
            if (v[h] >= 0 && v[h] < EXACT_CAP)
                ex[h][v[h]]++;
            else if (append_pair(big, h, v[h]) < 0)
                goto done;
        }
        en += cjk == 0;
        zh += cjk * 2 > chars;
        if (cutoff >= 0 && v[3] > cutoff && append_pair(too_long, i, v[3]) < 0)
            goto done;
    }
    result = Py_BuildValue("(LLOO)", en, zh, too_long, big);
done:
    Py_XDECREF(too_long);
    Py_XDECREF(big);
    if (got > 0)
        PyBuffer_Release(&table);
    if (got > 1)
        PyBuffer_Release(&starts);
    if (got > 2)
        PyBuffer_Release(&ends);
    for (int h = 0; h < 4 && h < got - 3; h++)
        PyBuffer_Release(&hists[h]);
    return result;
}

PyObject *
fastcols_arange(PyObject *self, PyObject *args)
{
    long long start;
    Py_ssize_t k;
    if (!PyArg_ParseTuple(args, "Ln", &start, &k))
        return NULL;
    if (k < 0)
        return PyErr_Format(PyExc_ValueError, "arange: k = %zd", k);
    PyObject *out = PyBytes_FromStringAndSize(NULL, k * 8);
    if (out == NULL)
        return NULL;
    int64_t *v = (int64_t *)PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < k; i++)
        v[i] = start + i;
    return out;
}

PyObject *
fastcols_add_into(PyObject *self, PyObject *args)
{
    PyObject *dst_obj, *src_obj;
    if (!PyArg_ParseTuple(args, "OO", &dst_obj, &src_obj))
        return NULL;
    Py_buffer dst, src;
    if (int64_buffer(dst_obj, &dst, 1, 0, "add_into dst") < 0)
        return NULL;
    if (int64_buffer(src_obj, &src, 0, 0, "add_into src") < 0) {
        PyBuffer_Release(&dst);
        return NULL;
    }
    if (dst.len != src.len) {
        PyBuffer_Release(&dst);
        PyBuffer_Release(&src);
        return PyErr_Format(PyExc_ValueError, "add_into: %zd and %zd bytes", dst.len, src.len);
    }
    int64_t *d = dst.buf;
    const int64_t *s = src.buf;
    for (Py_ssize_t i = 0; i < dst.len / 8; i++)
        d[i] += s[i];
    PyBuffer_Release(&dst);
    PyBuffer_Release(&src);
    Py_RETURN_NONE;
}
