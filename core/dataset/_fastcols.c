/* The column pass of the lint fast path (core/dataset/fastblock.py) in one C loop.
 *
 * columns(rows, k_ins, k_inp, k_out, escaped) takes the list that one orjson.loads of a block gave and
 * returns either
 *   - an int: the index of the first row that is not a dict of exactly three keys with the three
 *     expected keys holding str values (the caller then checks that line by line), or
 *   - (ins, inp, outs, table): the three columns as lists, and `table`, bytes holding int64 columns of
 *     len(rows) values each, in this order:
 *       0 len(instruction)  1 len(input)  2 len(output)     (characters)
 *       3 hash((instruction, input))      4 hash(output)    (the same values Python's hash() gives)
 *       5 1 when the row needs the exact content checks, else 0: a field starts or ends with
 *         whitespace (str.strip would change it), the output is shorter than 10 characters, or it is
 *         80 or more and its last 8 characters occur 4 times or more (content.maybe_repetitive)
 *       6 (only when escaped) characters beyond ASCII, as stats.cjk_chars counts them
 *
 * It computes exactly what the pure-Python fallback in fastblock.py computes with map(); tests compare
 * the two and the line-by-line path (tests/core/test_dataset_blockscan.py). Built as an optional
 * extension (setup.py): without a C compiler devtune runs the Python fallback.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define NCOLS_PLAIN 6
#define NCOLS_ESCAPED 7

static int
edge_space(PyObject *s)
{
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    if (n == 0)
        return 0;
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    return Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, 0))
        || Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, n - 1));
}

/* (UTF-8 length - length) >> 1, surrogates counted as 3 bytes (surrogatepass) */
static int64_t
cjk_chars(PyObject *s)
{
    if (PyUnicode_IS_ASCII(s))
        return 0;
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    int64_t extra = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        extra += c < 0x80 ? 0 : c < 0x800 ? 1 : c < 0x10000 ? 2 : 3;
    }
    return extra >> 1;
}

/* str.count(s[-8:]) >= 4 without building the tail: the same left-to-right, non-overlapping count
 * (after a match the search goes on after it), stopped once it reaches 4 */
#define TAIL 8
static int
repetitive(PyObject *out, Py_ssize_t n)
{
    if (n < 80)
        return 0;
    int kind = PyUnicode_KIND(out);
    const char *data = (const char *)PyUnicode_DATA(out);
    const char *tail = data + (n - TAIL) * kind;
    size_t width = (size_t)TAIL * kind;
    int count = 0;
    Py_ssize_t i = 0, last = n - TAIL;
    if (kind == PyUnicode_1BYTE_KIND) {
        const unsigned char first = (unsigned char)tail[0];
        while (i <= last) {
            const char *hit = memchr(data + i, first, (size_t)(last - i + 1));
            if (hit == NULL)
                break;
            i = hit - data;
            if (memcmp(hit, tail, width) == 0) {
                if (++count >= 4)
                    return 1;
                i += TAIL;
            }
            else
                i++;
        }
        return 0;
    }
    Py_UCS4 first = PyUnicode_READ(kind, data, n - TAIL);
    while (i <= last) {
        if (PyUnicode_READ(kind, data, i) == first && memcmp(data + i * kind, tail, width) == 0) {
            if (++count >= 4)
                return 1;
            i += TAIL;
        }
        else
            i++;
    }
    return 0;
}

static PyObject *
columns(PyObject *self, PyObject *args)
{
    PyObject *rows, *k_ins, *k_inp, *k_out;
    int escaped;
    if (!PyArg_ParseTuple(args, "O!UUUp:columns", &PyList_Type, &rows, &k_ins, &k_inp, &k_out, &escaped))
        return NULL;
    Py_ssize_t k = PyList_GET_SIZE(rows);
    int ncols = escaped ? NCOLS_ESCAPED : NCOLS_PLAIN;

    /* the shape first: nothing is allocated for a block that goes line by line */
    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *row = PyList_GET_ITEM(rows, i);
        if (!PyDict_CheckExact(row) || PyDict_GET_SIZE(row) != 3)
            return PyLong_FromSsize_t(i);
        PyObject *keys[3] = {k_ins, k_inp, k_out};
        for (int j = 0; j < 3; j++) {
            PyObject *v = PyDict_GetItemWithError(row, keys[j]);
            if (v == NULL) {
                if (PyErr_Occurred())
                    return NULL;
                return PyLong_FromSsize_t(i);
            }
            if (!PyUnicode_CheckExact(v))
                return PyLong_FromSsize_t(i);
        }
    }

    PyObject *ins = PyList_New(k), *inp = PyList_New(k), *outs = PyList_New(k);
    PyObject *table = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)sizeof(int64_t) * ncols * k);
    if (ins == NULL || inp == NULL || outs == NULL || table == NULL)
        goto fail;
    int64_t *t = (int64_t *)PyBytes_AS_STRING(table);
    int64_t *li = t, *ln = t + k, *lo = t + 2 * k, *hp = t + 3 * k, *ho = t + 4 * k, *ex = t + 5 * k;
    int64_t *cjk = escaped ? t + 6 * k : NULL;

    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *row = PyList_GET_ITEM(rows, i);
        PyObject *a = PyDict_GetItemWithError(row, k_ins);
        PyObject *b = PyDict_GetItemWithError(row, k_inp);
        PyObject *c = PyDict_GetItemWithError(row, k_out);
        if (a == NULL || b == NULL || c == NULL) {  /* checked above; only a failed lookup gets here */
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_RuntimeError, "columns: a row changed during the pass");
            goto fail;
        }
        Py_INCREF(a);
        PyList_SET_ITEM(ins, i, a);
        Py_INCREF(b);
        PyList_SET_ITEM(inp, i, b);
        Py_INCREF(c);
        PyList_SET_ITEM(outs, i, c);
        Py_ssize_t n = PyUnicode_GET_LENGTH(c);
        li[i] = PyUnicode_GET_LENGTH(a);
        ln[i] = PyUnicode_GET_LENGTH(b);
        lo[i] = n;

        PyObject *pair = PyTuple_Pack(2, a, b);
        if (pair == NULL)
            goto fail;
        Py_hash_t h = PyObject_Hash(pair);
        Py_DECREF(pair);
        if (h == -1 && PyErr_Occurred())
            goto fail;
        hp[i] = h;
        h = PyObject_Hash(c);
        if (h == -1 && PyErr_Occurred())
            goto fail;
        ho[i] = h;

        ex[i] = n < 10 || repetitive(c, n) || edge_space(a) || edge_space(b) || edge_space(c);
        if (cjk != NULL)
            cjk[i] = cjk_chars(a) + cjk_chars(b) + cjk_chars(c);
    }
    PyObject *result = PyTuple_Pack(4, ins, inp, outs, table);
    Py_DECREF(ins);
    Py_DECREF(inp);
    Py_DECREF(outs);
    Py_DECREF(table);
    return result;

fail:
    Py_XDECREF(ins);
    Py_XDECREF(inp);
    Py_XDECREF(outs);
    Py_XDECREF(table);
    return NULL;
}

/* ------------------------------------------------------------------ the byte pass over a block
 *
 * scan_lines(body) -> (starts, ends, bad, hits, dup_keys) for the lines of `body` (split on \n, body
 * without its final newline):
 *   starts, ends  bytes holding int64 offsets: where each line starts, where its \n is (or len(body))
 *   bad           index of the first line that cannot be an ordinary row (shorter than 2 bytes, or its
 *                 last byte before an optional \r is not `}`), or -1
 *   hits          the lines holding a content hint, sorted: exactly the lines prefilter.hit_lines gives
 *                 with numpy (the same rules, listed there)
 *   dup_keys      the lines whose `":` count is not 3 (a repeated key: the line-by-line path's test),
 *                 none when the block holds exactly three colons a line
 *
 * Speed: a byte-at-a-time loop costs more than numpy's several whole-array passes. So the hints are
 * found 16 bytes at a time (GCC/Clang vector extensions: SSE2 on x86-64, NEON on arm64): a byte is a
 * candidate when it could start a hint (`@`, `+`, `\`, the first of three digits, a marker's first two
 * bytes), candidates are rare in ordinary text, and only they are checked exactly, one by one. A line
 * with a hint is left at once for the next one.
 */

static int
is_digit(unsigned char c)
{
    return (unsigned char)(c - '0') < 10;
}

static int
email_char(unsigned char c)
{  /* [A-Za-z0-9._%+-] */
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) || c == '.' || c == '_'
        || c == '%' || c == '+' || c == '-';
}

static int
lower_is(unsigned char c, char want)
{
    return (c | 0x20) == want;
}

/* prefilter.ESCAPED at p (p points at the backslash; the caller checked p + 6 <= n) */
static int
escaped_marker(const unsigned char *p)
{
    if (p[1] != 'u')
        return 0;
    const unsigned char *h = p + 2;
    if (h[0] == '2' && h[1] == '0' && h[2] == '0' && (lower_is(h[3], 'b') || lower_is(h[3], 'c') || lower_is(h[3], 'd')))
        return 1;
    if (h[0] == '2' && h[1] == '0' && h[2] == '6' && h[3] == '0')
        return 1;
    if (lower_is(h[0], 'f') && lower_is(h[1], 'e') && lower_is(h[2], 'f') && lower_is(h[3], 'f'))
        return 1;
    if (lower_is(h[0], 'f') && lower_is(h[1], 'f') && lower_is(h[2], 'f') && lower_is(h[3], 'd'))
        return 1;
    if (h[0] == '9' && h[1] == '5' && h[2] == '1' && lower_is(h[3], 'f'))
        return 1;
    if (h[0] == '0' && h[1] == '0' && lower_is(h[2], 'c') && (h[3] == '2' || h[3] == '3'))
        return 1;
    if (h[0] == '0' && h[1] == '0' && lower_is(h[2], 'e') && h[3] == '2')
        return 1;
    return 0;
}

/* prefilter.MARKERS at p (p points at the lead byte; `left` bytes from p to the end of the body) */
static int
utf8_marker(const unsigned char *p, Py_ssize_t left)
{
    if (left < 2)
        return 0;
    unsigned char a = p[0], b = p[1];
    if (a == 0xC3)
        return b == 0x83 || b == 0xA2 || b == 0x82;
    if (left < 3)
        return 0;
    unsigned char c = p[2];
    if (a == 0xE2)
        return (b == 0x80 && c >= 0x8B && c <= 0x8D) || (b == 0x81 && c == 0xA0);
    if (a == 0xEF)
        return (b == 0xBB && c == 0xBF) || (b == 0xBF && c == 0xBD);
    if (a == 0xE9)
        return b == 0x94 && c == 0x9F;
    return 0;
}

/* Whether the byte at p may start a hint: the vector test's rule, byte by byte (for the last bytes). */
static int
candidate(const unsigned char *b, Py_ssize_t p, Py_ssize_t n)
{
    unsigned char c = b[p], c1 = p + 1 < n ? b[p + 1] : 0, c2 = p + 2 < n ? b[p + 2] : 0;
    return c == '@' || c == '+' || c == '\\' || (is_digit(c) && is_digit(c1) && is_digit(c2))
        || (c == 0xE9 && c1 == 0x94) || (c == 0xC3 && (c1 == 0x83 || c1 == 0xA2 || c1 == 0x82))
        || (c == 0xE2 && (c1 & 0xFE) == 0x80) || (c == 0xEF && (c1 | 0x04) == 0xBF);
}

/* The exact test at a candidate in the line [ls, le). For a digit run, *resume is set past it. */
static int
hint_at(const unsigned char *b, Py_ssize_t p, Py_ssize_t ls, Py_ssize_t n, Py_ssize_t *resume)
{
    unsigned char c = b[p];
    if (c == '@')
        return p > ls && email_char(b[p - 1]);
    if (c == '+')
        return p + 1 < n && b[p + 1] >= '1' && b[p + 1] <= '9';
    if (c == '\\')
        return p + 6 <= n && escaped_marker(b + p);
    if (is_digit(c)) {  /* a run of 11+ digits, or of 3+ then - or . then 4+ (prefilter._digit_runs) */
        Py_ssize_t rs = p, re = p;
        while (rs > ls && is_digit(b[rs - 1]))
            rs--;
        while (re < n && is_digit(b[re]))
            re++;
        *resume = re;
        if (re - rs >= 11)
            return 1;
        if (re - rs >= 3 && re < n && (b[re] == '-' || b[re] == '.')) {
            Py_ssize_t r2 = re + 1;
            while (r2 < n && is_digit(b[r2]) && r2 - re - 1 < 4)
                r2++;
            return r2 - re - 1 >= 4;
        }
        return 0;
    }
    return utf8_marker(b + p, n - p);
}

#if defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define VECTOR_SCAN 1
typedef unsigned char v16 __attribute__((vector_size(16)));
typedef uint64_t v2x64 __attribute__((vector_size(16)));

static inline v16
load16(const unsigned char *p)
{
    v16 v;
    memcpy(&v, p, 16);
    return v;
}

/* the candidates among the 16 bytes at p (needs p + 18 <= n): 0xFF per candidate byte */
static inline v2x64
candidates16(const unsigned char *p)
{
    v16 v0 = load16(p), v1 = load16(p + 1), v2 = load16(p + 2);
    v16 m = (v16)((v0 == '@') | (v0 == '+') | (v0 == '\\'));
    m |= (v16)(((v16)(v0 - '0') < 10) & ((v16)(v1 - '0') < 10) & ((v16)(v2 - '0') < 10));
    m |= (v16)((v0 == 0xE9) & (v1 == 0x94));
    m |= (v16)((v0 == 0xC3) & ((v1 == 0x83) | (v1 == 0xA2) | (v1 == 0x82)));
    m |= (v16)((v0 == 0xE2) & ((v1 & 0xFE) == 0x80));
    m |= (v16)((v0 == 0xEF) & ((v1 | 0x04) == 0xBF));
    return (v2x64)m;
}
#endif

/* The lines of [0, n) with a hint, appended to `hits`; line bounds in st/en (k lines). */
static int
find_hints(const unsigned char *b, Py_ssize_t n, const int64_t *st, const int64_t *en, Py_ssize_t k,
           PyObject *hits)
{
    Py_ssize_t line = 0, i = 0, resume = 0;
    while (i < n) {
        uint64_t lanes[2];
        Py_ssize_t width;
#ifdef VECTOR_SCAN
        if (i + 34 <= n) {  /* the common case: 32 bytes without a candidate */
            v2x64 m = candidates16(b + i) | candidates16(b + i + 16);
            if ((m[0] | m[1]) == 0) {
                i += 32;
                continue;
            }
        }
        if (i + 18 <= n) {
            v2x64 m = candidates16(b + i);
            lanes[0] = m[0];
            lanes[1] = m[1];
            width = 16;
        }
        else
#endif
        {
            lanes[0] = lanes[1] = 0;
            width = n - i < 16 ? n - i : 16;
            for (Py_ssize_t j = 0; j < width; j++)
                if (candidate(b, i + j, n))
                    lanes[j >> 3] |= (uint64_t)0xFF << ((j & 7) * 8);
        }
        Py_ssize_t next = i + width;
        for (int half = 0; half < 2; half++) {
            uint64_t m = lanes[half];
            while (m) {
                int byte = __builtin_ctzll(m) >> 3;
                m &= ~((uint64_t)0xFF << (byte * 8));
                Py_ssize_t p = i + half * 8 + byte;
                if (p < resume)
                    continue;
                while (line + 1 < k && st[line + 1] <= p)
                    line++;
                if (hint_at(b, p, st[line], n, &resume)) {
                    PyObject *v = PyLong_FromSsize_t(line);
                    if (v == NULL || PyList_Append(hits, v) < 0) {
                        Py_XDECREF(v);
                        return -1;
                    }
                    Py_DECREF(v);
                    resume = en[line] + 1;  /* the line is settled: on to the next one */
                }
            }
        }
        i = next > resume ? next : resume;
    }
    return 0;
}

/* how many bytes of [b, b + n) are c */
static Py_ssize_t
count_byte(const unsigned char *b, Py_ssize_t n, unsigned char c)
{
    Py_ssize_t total = 0, i = 0;
#ifdef VECTOR_SCAN
    while (i + 16 <= n) {
        v16 acc = {0};
        for (int r = 0; r < 255 && i + 16 <= n; r++, i += 16)
            acc -= (v16)(load16(b + i) == c);  /* -1 per match: the count per lane, up to 255 */
        v2x64 w = (v2x64)acc;
        for (int h = 0; h < 2; h++)
            for (int j = 0; j < 8; j++)
                total += (w[h] >> (8 * j)) & 0xFF;
    }
#endif
    for (; i < n; i++)
        total += b[i] == c;
    return total;
}

static int
append_index(PyObject *list, Py_ssize_t i)
{
    PyObject *v = PyLong_FromSsize_t(i);
    if (v == NULL)
        return -1;
    int r = PyList_Append(list, v);
    Py_DECREF(v);
    return r;
}

static PyObject *
scan_lines(PyObject *self, PyObject *arg)
{
    if (!PyBytes_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "scan_lines: bytes expected");
        return NULL;
    }
    const unsigned char *body = (const unsigned char *)PyBytes_AS_STRING(arg);
    Py_ssize_t n = PyBytes_GET_SIZE(arg);
    Py_ssize_t k = 1, colons = 0;
    for (const unsigned char *q = body; (q = memchr(q, '\n', (size_t)(body + n - q))) != NULL; q++)
        k++;
    colons = count_byte(body, n, ':');
    PyObject *starts = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)sizeof(int64_t) * k);
    PyObject *ends = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)sizeof(int64_t) * k);
    PyObject *hits = PyList_New(0), *dup_keys = PyList_New(0);
    if (starts == NULL || ends == NULL || hits == NULL || dup_keys == NULL)
        goto fail;
    int64_t *st = (int64_t *)PyBytes_AS_STRING(starts), *en = (int64_t *)PyBytes_AS_STRING(ends);
    Py_ssize_t bad = -1, s = 0;
    for (Py_ssize_t line = 0; line < k; line++) {
        const unsigned char *nl = memchr(body + s, '\n', (size_t)(n - s));
        Py_ssize_t e = nl ? nl - body : n;
        st[line] = s;
        en[line] = e;
        if (bad < 0) {
            Py_ssize_t last = e - 1;
            if (e - s < 2)
                bad = line;
            else {
                if (body[last] == '\r' && last > s)
                    last--;
                if (body[last] != '}')
                    bad = line;
            }
        }
        /* three keys a line need three colons a line: with no more than that in the block, no key
           repeats; else the lines whose `":` count is not 3 */
        if (colons != 3 * k) {
            int quote_colons = 0;
            for (const unsigned char *q = body + s; (q = memchr(q, ':', (size_t)(body + e - q))) != NULL; q++)
                quote_colons += q > body + s && q[-1] == '"';
            if (quote_colons != 3 && append_index(dup_keys, line) < 0)
                goto fail;
        }
        s = e + 1;
    }
    if (find_hints(body, n, st, en, k, hits) < 0)
        goto fail;
    return Py_BuildValue("(NNnNN)", starts, ends, bad, hits, dup_keys);

fail:
    Py_XDECREF(starts);
    Py_XDECREF(ends);
    Py_XDECREF(hits);
    Py_XDECREF(dup_keys);
    return NULL;
}

static PyMethodDef methods[] = {
    {"scan_lines", scan_lines, METH_O,
     "scan_lines(body) -> (starts, ends, first bad line or -1, hint lines, repeated-key lines)"},
    {"columns", columns, METH_VARARGS,
     "columns(rows, k_ins, k_inp, k_out, escaped) -> first odd row index | (ins, inp, outs, int64 table)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_fastcols",
    "The byte and column passes of the lint fast path in C (see core/dataset/fastblock.py).", -1, methods,
};

PyMODINIT_FUNC
PyInit__fastcols(void)
{
    return PyModule_Create(&module);
}
