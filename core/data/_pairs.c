/* The findings of duplicate and conflicting rows in C (part of the `_fastcols` extension): a large
 * file has tens of thousands, and building each through the dataclass __init__ and a %-format cost
 * ~1 µs a row of the lint's serial tail (core/dataset/findings.py: findings_for_pairs).
 *
 * pair_findings(cls, rule, severity, fix, lines, others, pieces) -> list of cls
 *   lines, others: lists of int of one length; pieces: (before, between, after, swapped), str. The
 *   message of row i is before + str(a) + between + str(b) + after, with (a, b) = (lines[i],
 *   others[i]), or (others[i], lines[i]) when swapped. Each object is allocated as cls (a slots
 *   class) and its fields rule, severity, line, message, fix, column (None) are set through the
 *   class's own slot descriptors, as cls(rule, severity, line, message, fix) would set them.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

static const char *FIELDS[6] = {"rule", "severity", "line", "message", "fix", "column"};

typedef struct {
    const char *data;
    Py_ssize_t size;
} Utf8;

/* writes v in decimal at p, returns the end (what "%lld" writes, without snprintf's cost) */
static char *
put_int(char *p, long long v)
{
    char digits[24];
    int n = 0;
    unsigned long long u = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
    do {
        digits[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        *p++ = '-';
    while (n)
        *p++ = digits[--n];
    return p;
}

static int
utf8_piece(PyObject *pieces, Py_ssize_t i, Utf8 *out)
{
    PyObject *s = PyTuple_GET_ITEM(pieces, i);
    if (!PyUnicode_Check(s)) {
        PyErr_SetString(PyExc_TypeError, "pair_findings: the message pieces are str");
        return -1;
    }
    out->data = PyUnicode_AsUTF8AndSize(s, &out->size);
    return out->data == NULL ? -1 : 0;
}

PyObject *
fastcols_pair_findings(PyObject *self, PyObject *args)
{
    PyObject *cls, *rule, *severity, *fix, *lines, *others, *pieces;
    if (!PyArg_ParseTuple(args, "O!OOOO!O!O!", &PyType_Type, &cls, &rule, &severity, &fix, &PyList_Type, &lines,
                          &PyList_Type, &others, &PyTuple_Type, &pieces))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(lines);
    if (PyList_GET_SIZE(others) != n || PyTuple_GET_SIZE(pieces) != 4)
        return PyErr_Format(PyExc_ValueError, "pair_findings: lines and others of one length, 4 pieces");
    Utf8 lit[3];
    for (int i = 0; i < 3; i++)
        if (utf8_piece(pieces, i, &lit[i]) < 0)
            return NULL;
    int swapped = PyObject_IsTrue(PyTuple_GET_ITEM(pieces, 3));
    if (swapped < 0)
        return NULL;
    PyTypeObject *type = (PyTypeObject *)cls;
    PyObject *descr[6] = {NULL};
    descrsetfunc set[6];
    PyObject *result = NULL;
    char *buf = NULL;
    for (int f = 0; f < 6; f++) {
        descr[f] = PyObject_GetAttrString(cls, FIELDS[f]);
        if (descr[f] == NULL)
            goto done;
        set[f] = Py_TYPE(descr[f])->tp_descr_set;
        if (set[f] == NULL) {
            PyErr_Format(PyExc_TypeError, "pair_findings: %s is not a slot of the class", FIELDS[f]);
            goto done;
        }
    }
    Py_ssize_t cap = lit[0].size + lit[1].size + lit[2].size + 2 * 24;
    buf = PyMem_Malloc(cap);
    result = PyList_New(n);
    if (buf == NULL || result == NULL) {
        if (buf == NULL)
            PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *line = PyList_GET_ITEM(lines, i), *other = PyList_GET_ITEM(others, i);
        long long a = PyLong_AsLongLong(swapped ? other : line), b = PyLong_AsLongLong(swapped ? line : other);
        if ((a == -1 || b == -1) && PyErr_Occurred())
            goto fail;
        char *p = buf;
        memcpy(p, lit[0].data, lit[0].size);
        p += lit[0].size;
        p = put_int(p, a);
        memcpy(p, lit[1].data, lit[1].size);
        p += lit[1].size;
        p = put_int(p, b);
        memcpy(p, lit[2].data, lit[2].size);
        p += lit[2].size;
        PyObject *message = PyUnicode_DecodeUTF8(buf, p - buf, NULL);
        PyObject *obj = message ? type->tp_alloc(type, 0) : NULL;
        if (obj == NULL) {
            Py_XDECREF(message);
            goto fail;
        }
        PyList_SET_ITEM(result, i, obj);
        PyObject *values[6] = {rule, severity, line, message, fix, Py_None};
        for (int f = 0; f < 6; f++) {
            if (set[f](descr[f], obj, values[f]) < 0) {
                Py_DECREF(message);
                goto fail;
            }
        }
        Py_DECREF(message);
    }
    goto done;
fail:
    Py_CLEAR(result);
done:
    PyMem_Free(buf);
    for (int f = 0; f < 6; f++)
        Py_XDECREF(descr[f]);
    return result;
}
