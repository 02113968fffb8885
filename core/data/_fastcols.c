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

/* the first index in [i, last] whose character is c (memchr for 1-byte strings), or last + 1 */
static Py_ssize_t
next_char(int kind, const char *data, Py_ssize_t i, Py_ssize_t last, Py_UCS4 c)
{
    if (i > last)
        return last + 1;
    if (kind == PyUnicode_1BYTE_KIND) {
        const char *hit = memchr(data + i, (int)c, (size_t)(last - i + 1));
        return hit != NULL ? hit - data : last + 1;
    }
    while (i <= last && PyUnicode_READ(kind, data, i) != c)
        i++;
    return i;
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
    Py_UCS4 first = PyUnicode_READ(kind, data, n - TAIL);
    while ((i = next_char(kind, data, i, last, first)) <= last) {
        if (memcmp(data + i * kind, tail, width) == 0) {
            if (++count >= 4)
                return 1;
            i += TAIL;
        }
        else
            i++;
    }
    return 0;
}

/* hash((a, b)) as CPython's tuplehash computes it (xxHash-based, 3.8 and later), without building the
 * tuple; `tuple_hash_ok` says whether this interpreter agrees (checked at import), else a tuple is built */
#if SIZEOF_PY_UHASH_T > 4
#define XXPRIME_1 ((Py_uhash_t)11400714785074694791ULL)
#define XXPRIME_2 ((Py_uhash_t)14029467366897019727ULL)
#define XXPRIME_5 ((Py_uhash_t)2870177450012600261ULL)
#define XXROTATE(x) ((x << 31) | (x >> 33))
#else
#define XXPRIME_1 ((Py_uhash_t)2654435761UL)
#define XXPRIME_2 ((Py_uhash_t)2246822519UL)
#define XXPRIME_5 ((Py_uhash_t)374761393UL)
#define XXROTATE(x) ((x << 13) | (x >> 19))
#endif
static int tuple_hash_ok = 0;

static Py_hash_t
pair_hash(PyObject *a, PyObject *b)
{
    if (!tuple_hash_ok) {
        PyObject *pair = PyTuple_Pack(2, a, b);
        if (pair == NULL)
            return -1;
        Py_hash_t h = PyObject_Hash(pair);
        Py_DECREF(pair);
        return h;
    }
    PyObject *items[2] = {a, b};
    Py_uhash_t acc = XXPRIME_5;
    for (int i = 0; i < 2; i++) {
        Py_uhash_t lane = (Py_uhash_t)PyObject_Hash(items[i]);
        if (lane == (Py_uhash_t)-1)
            return -1;
        acc += lane * XXPRIME_2;
        acc = XXROTATE(acc);
        acc *= XXPRIME_1;
    }
    acc += 2 ^ (XXPRIME_5 ^ 3527539UL);
    if (acc == (Py_uhash_t)-1)
        return 1546275796;
    return (Py_hash_t)acc;
}

static int
check_tuple_hash(void)
{
    PyObject *a = PyUnicode_FromString("instruction"), *b = PyUnicode_FromString("");
    if (a == NULL || b == NULL) {
        Py_XDECREF(a);
        Py_XDECREF(b);
        return -1;
    }
    tuple_hash_ok = 0;
    Py_hash_t slow = pair_hash(a, b);
    tuple_hash_ok = 1;
    Py_hash_t fast = pair_hash(a, b);
    tuple_hash_ok = slow != -1 && slow == fast;
    Py_DECREF(a);
    Py_DECREF(b);
    return 0;
}

/* Which of the three wanted keys `key` is (0, 1, 2), or -1. orjson hands out one cached str object per
 * key, so after the first row each key is found by identity in `seen`. */
static int
key_slot(PyObject *key, PyObject *const *wanted, PyObject **seen)
{
    for (int j = 0; j < 3; j++)
        if (key == seen[j])
            return j;
    if (!PyUnicode_CheckExact(key))
        return -1;
    for (int j = 0; j < 3; j++)
        if (PyUnicode_GET_LENGTH(key) == PyUnicode_GET_LENGTH(wanted[j]) && PyUnicode_Compare(key, wanted[j]) == 0) {
            seen[j] = key;  /* borrowed: the row holds it for the rest of this call */
            return j;
        }
    return -1;
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
    PyObject *const wanted[3] = {k_ins, k_inp, k_out};
    PyObject *seen[3] = {k_ins, k_inp, k_out};

    PyObject *ins = PyList_New(k), *inp = PyList_New(k), *outs = PyList_New(k);
    PyObject *table = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)sizeof(int64_t) * ncols * k);
    PyObject *odd = NULL;  /* the index of the first row that is not an ordinary one */
    if (ins == NULL || inp == NULL || outs == NULL || table == NULL)
        goto fail;
    int64_t *t = (int64_t *)PyBytes_AS_STRING(table);
    int64_t *li = t, *ln = t + k, *lo = t + 2 * k, *hp = t + 3 * k, *ho = t + 4 * k, *ex = t + 5 * k;
    int64_t *cjk = escaped ? t + 6 * k : NULL;

    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *row = PyList_GET_ITEM(rows, i);
        PyObject *got[3] = {NULL, NULL, NULL};
        if (!PyDict_CheckExact(row) || PyDict_GET_SIZE(row) != 3)
            goto odd_row;
        Py_ssize_t pos = 0;
        PyObject *key, *value;
        while (PyDict_Next(row, &pos, &key, &value)) {
            int j = key_slot(key, wanted, seen);
            if (j < 0 || got[j] != NULL || !PyUnicode_CheckExact(value))
                goto odd_row;
            got[j] = value;
        }
        PyObject *a = got[0], *b = got[1], *c = got[2];
        if (a == NULL || b == NULL || c == NULL)
            goto odd_row;
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
        Py_hash_t h = pair_hash(a, b);
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
        continue;
    odd_row:
        odd = PyLong_FromSsize_t(i);
        goto fail;
    }
    PyObject *result = PyTuple_Pack(4, ins, inp, outs, table);
    Py_DECREF(ins);
    Py_DECREF(inp);
    Py_DECREF(outs);
    Py_DECREF(table);
    return result;

fail:  /* an error (odd is NULL), or an odd row (its index) */
    Py_XDECREF(ins);
    Py_XDECREF(inp);
    Py_XDECREF(outs);
    Py_XDECREF(table);
    return odd;
}

/* b"[" + body.replace(b"\n", b",\n") + b"]" in one copy; k: the lines in body (newlines + 1) */
static PyObject *
json_array(PyObject *self, PyObject *args)
{
    const char *body;
    Py_ssize_t n, k;
    if (!PyArg_ParseTuple(args, "y#n:json_array", &body, &n, &k))
        return NULL;
    PyObject *out = PyBytes_FromStringAndSize(NULL, n + 2 + (k - 1));
    if (out == NULL)
        return NULL;
    char *w = PyBytes_AS_STRING(out), *end = w + PyBytes_GET_SIZE(out);
    *w++ = '[';
    const char *r = body, *stop = body + n;
    const char *nl;
    while ((nl = memchr(r, '\n', (size_t)(stop - r))) != NULL) {
        if (w + (nl - r) + 2 > end - 1) {
            Py_DECREF(out);
            PyErr_SetString(PyExc_ValueError, "json_array: more lines than k");
            return NULL;
        }
        memcpy(w, r, (size_t)(nl - r));
        w += nl - r;
        *w++ = ',';
        *w++ = '\n';
        r = nl + 1;
    }
    if (w + (stop - r) != end - 1) {
        Py_DECREF(out);
        PyErr_SetString(PyExc_ValueError, "json_array: fewer lines than k");
        return NULL;
    }
    memcpy(w, r, (size_t)(stop - r));
    w += stop - r;
    *w = ']';
    return out;
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
 * found 32 bytes at a time (GCC/Clang vector extensions: AVX2 or SSE2 on x86-64, NEON on arm64): a byte is a
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
/* the 32-byte vectors below are passed only between static functions of this file, never across an
   ABI boundary: GCC's note that their calling convention differs with and without AVX does not apply */
#pragma GCC diagnostic ignored "-Wpsabi"
typedef unsigned char v32 __attribute__((vector_size(32)));
typedef uint64_t v4x64 __attribute__((vector_size(32)));

/* x86-64 with GCC and glibc: an AVX2 build of the loops besides the SSE2 one, picked at load time */
#if defined(__x86_64__) && !defined(__clang__) && defined(__GLIBC__)
#define VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define VECTOR_CLONES
#endif

static inline v32
load32(const unsigned char *p)
{
    v32 v;
    memcpy(&v, p, 32);
    return v;
}

/* the candidates among the 32 bytes at p (needs p + 34 <= n): 0xFF per candidate byte */
static inline v4x64
candidates32(const unsigned char *p)
{
    v32 v0 = load32(p), v1 = load32(p + 1), v2 = load32(p + 2);
    v32 m = (v32)((v0 == '@') | (v0 == '+') | (v0 == '\\'));
    m |= (v32)(((v32)(v0 - '0') < 10) & ((v32)(v1 - '0') < 10) & ((v32)(v2 - '0') < 10));
    m |= (v32)((v0 == 0xE9) & (v1 == 0x94));
    m |= (v32)((v0 == 0xC3) & ((v1 == 0x83) | (v1 == 0xA2) | (v1 == 0x82)));
    m |= (v32)((v0 == 0xE2) & ((v1 & 0xFE) == 0x80));
    m |= (v32)((v0 == 0xEF) & ((v1 | 0x04) == 0xBF));
    return (v4x64)m;
}
#else
#define VECTOR_CLONES
#endif

/* The lines of [0, n) with a hint, appended to `hits`; line bounds in st/en (k lines). */
VECTOR_CLONES static int
find_hints(const unsigned char *b, Py_ssize_t n, const int64_t *st, const int64_t *en, Py_ssize_t k,
           PyObject *hits)
{
    Py_ssize_t line = 0, i = 0, resume = 0;
    while (i < n) {
        uint64_t lanes[4] = {0, 0, 0, 0};
        Py_ssize_t width;
#ifdef VECTOR_SCAN
        if (i + 34 <= n) {
            v4x64 m = candidates32(b + i);
            if ((m[0] | m[1] | m[2] | m[3]) == 0) {  /* the common case: no candidate in 32 bytes */
                i += 32;
                continue;
            }
            for (int h = 0; h < 4; h++)
                lanes[h] = m[h];
            width = 32;
        }
        else
#endif
        {
            width = n - i < 32 ? n - i : 32;
            for (Py_ssize_t j = 0; j < width; j++)
                if (candidate(b, i + j, n))
                    lanes[j >> 3] |= (uint64_t)0xFF << ((j & 7) * 8);
        }
        Py_ssize_t next = i + width;
        for (int h = 0; h < 4; h++) {
            uint64_t m = lanes[h];
            while (m) {
                int byte = __builtin_ctzll(m) >> 3;
                m &= ~((uint64_t)0xFF << (byte * 8));
                Py_ssize_t p = i + h * 8 + byte;
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
VECTOR_CLONES static Py_ssize_t
count_byte(const unsigned char *b, Py_ssize_t n, unsigned char c)
{
    Py_ssize_t total = 0, i = 0;
#ifdef VECTOR_SCAN
    while (i + 32 <= n) {
        v32 acc = {0};
        for (int r = 0; r < 255 && i + 32 <= n; r++, i += 32)
            acc -= (v32)(load32(b + i) == c);  /* -1 per match: the count per lane, up to 255 */
        v4x64 w = (v4x64)acc;
        for (int h = 0; h < 4; h++)
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

PyObject *fastcols_duplicates(PyObject *self, PyObject *arg); /* _dups.c */
PyObject *fastcols_fold(PyObject *self, PyObject *args);       /* _fold.c */
PyObject *fastcols_arange(PyObject *self, PyObject *args);
PyObject *fastcols_add_into(PyObject *self, PyObject *args);
PyObject *fastcols_pair_findings(PyObject *self, PyObject *args); /* _pairs.c */

static PyMethodDef methods[] = {
    {"json_array", json_array, METH_VARARGS,
     "json_array(body, k) -> b'[' + body.replace(b'\\n', b',\\n') + b']' (k: the lines in body)"},
    {"scan_lines", scan_lines, METH_O,
     "scan_lines(body) -> (starts, ends, first bad line or -1, hint lines, repeated-key lines)"},
    {"columns", columns, METH_VARARGS,
     "columns(rows, k_ins, k_inp, k_out, escaped) -> first odd row index | (ins, inp, outs, int64 table)"},
    {"duplicates", fastcols_duplicates, METH_O,
     "duplicates([(lines, prompts, outputs, delta), ...]) -> (dup_lines, dup_of, conflict_lines, "
     "conflict_with), int64 bytes in line order (see _dups.c)"},
    {"fold", fastcols_fold, METH_VARARGS,
     "fold(table, k, escaped, starts, ends, key_overhead, cutoff, h_ins, h_inp, h_out, h_tokens) -> "
     "(en, zh, too_long, big) (see _fold.c)"},
    {"arange", fastcols_arange, METH_VARARGS, "arange(start, k) -> int64 bytes start .. start + k - 1"},
    {"add_into", fastcols_add_into, METH_VARARGS, "add_into(dst, src): dst[i] += src[i], int64 buffers"},
    {"pair_findings", fastcols_pair_findings, METH_VARARGS,
     "pair_findings(cls, rule, severity, fix, lines, others, (before, between, after, swapped)) -> [cls] "
     "(see _pairs.c)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_fastcols",
    "The byte and column passes of the lint fast path in C (see core/dataset/fastblock.py), and its "
    "duplicate finder (_dups.c, see core/dataset/fingerprints.py).", -1, methods,
};

PyMODINIT_FUNC
PyInit__fastcols(void)
{
    if (check_tuple_hash() < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && PyModule_AddIntConstant(m, "TUPLE_HASH_INLINE", tuple_hash_ok) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
