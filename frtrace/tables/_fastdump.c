/*
 * Flight Recorder pickles straight into columns, without a Python object per entry.
 *
 * Python's unpickler builds millions of dicts, lists and strings that columnize() then walks
 * and throws away. This module runs a restricted pickle VM over the bytes into an arena of
 * tagged nodes (no PyObject per node), then walks the entries with a fixed schema, hash-conses
 * the call-site values (structural equality, strings by content) and returns per-entry int64 /
 * float64 / int32-code buffers plus the short tables of distinct values as Python objects.
 *
 * The input is hostile. Every read is bounds-checked, nothing is allocated in proportion to a
 * number written in the file (only to bytes actually present), the VM never recurses and the
 * schema walk recurses only to a fixed small depth. Anything that is not exactly what a dump
 * holds (another opcode, a type a field does not hold in real dumps, a budget exceeded, a
 * cycle, invalid UTF-8) makes parse() return None: the caller then runs the Python path,
 * which gives its exact error or result. Declining is always safe; accepting must be exact.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- status codes: every helper returns one; anything but OK unwinds to "decline" ------- */
#define OK 0
#define DECLINE (-1)

#define TRY(expr)                                                                          \
    do {                                                                                   \
        if ((expr) != OK) return DECLINE;                                                  \
    } while (0)

/* ---- growable arrays: doubling, so their size follows the bytes read, never a claim ----- */
static int grow(void **p, size_t *cap, size_t need, size_t elt) {
    if (need <= *cap) return OK;
    size_t c = *cap ? *cap : 64;
    while (c < need) {
        if (c > SIZE_MAX / 2 / elt) return DECLINE;
        c *= 2;
    }
    void *q = realloc(*p, c * elt);
    if (!q) return DECLINE;
    *p = q;
    *cap = c;
    return OK;
}

/* ---- the arena ------------------------------------------------------------------------- */
enum { N_NONE, N_FALSE, N_TRUE, N_INT, N_FLOAT, N_STR, N_LIST, N_DICT, N_TUPLE };

typedef struct {
    int64_t a;  /* INT: value; FLOAT: bits; STR: offset into the input; containers: c_set */
    uint32_t b; /* STR: byte length; containers: number of children */
    uint8_t kind;
} Node;

/* A container's children are a run kids[start .. start+count) with room for cap: one batch
 * (how picklers write a container) fits exactly; a later batch that does not fit moves the
 * run to the end with doubled room, so appends cost amortized O(1) and the waste stays below
 * twice the children actually read. */
static inline uint32_t c_start(const Node *n) { return (uint32_t)((uint64_t)n->a & 0xFFFFFFFFu); }
static inline uint32_t c_cap(const Node *n) { return (uint32_t)((uint64_t)n->a >> 32); }
static inline void c_set(Node *n, uint32_t start, uint32_t cap) {
    n->a = (int64_t)(((uint64_t)cap << 32) | start);
}

typedef struct {
    const uint8_t *buf;
    size_t len, pos;
    size_t end;       /* where reads must stop: the file's end, or the current frame's */
    size_t frame_end; /* 0: not inside a protocol-4 frame */

    Node *nodes;
    size_t nn, ncap;
    int32_t *stack;
    size_t sn, scap;
    size_t *marks;
    size_t mn, mcap;
    int32_t *memo;
    size_t memocap, memo_len;
    int32_t *kids; /* children of containers (see c_start); dict items: key, value */
    size_t kn, kcap;
} VM;

static inline int new_node(VM *vm, uint8_t kind, int64_t a, uint32_t b, int32_t *out) {
    if (vm->nn >= vm->ncap) {
        if (vm->nn >= INT32_MAX) return DECLINE;
        TRY(grow((void **)&vm->nodes, &vm->ncap, vm->nn + 1, sizeof(Node)));
    }
    vm->nodes[vm->nn].a = a;
    vm->nodes[vm->nn].b = b;
    vm->nodes[vm->nn].kind = kind;
    *out = (int32_t)vm->nn++;
    return OK;
}

static inline int push(VM *vm, int32_t node) {
    if (vm->sn >= vm->scap) TRY(grow((void **)&vm->stack, &vm->scap, vm->sn + 1, sizeof(int32_t)));
    vm->stack[vm->sn++] = node;
    return OK;
}

/* Append m children (from the VM stack) to a container's run. */
static int add_children(VM *vm, int32_t node, const int32_t *items, size_t m) {
    Node *nd = &vm->nodes[node];
    uint32_t count = nd->b, start = c_start(nd), cap = c_cap(nd);
    if (m > (size_t)(cap - count)) {
        size_t room = count + m;
        if (count && room < 2 * (size_t)cap) room = 2 * (size_t)cap;
        if (count && start + (size_t)cap == vm->kn) vm->kn = start; /* last run: in place */
        if (room > UINT32_MAX || vm->kn + room > UINT32_MAX) return DECLINE;
        if (vm->kn + room > vm->kcap)
            TRY(grow((void **)&vm->kids, &vm->kcap, vm->kn + room, sizeof(int32_t)));
        if (count && vm->kn != start)
            memmove(vm->kids + vm->kn, vm->kids + start, count * sizeof(int32_t));
        start = (uint32_t)vm->kn;
        cap = (uint32_t)room;
        vm->kn += room;
        nd = &vm->nodes[node];
    }
    int32_t *dst = vm->kids + start + count;
    for (size_t i = 0; i < m; i++) dst[i] = items[i]; /* batches are short: no memcpy call */
    nd->b = count + (uint32_t)m;
    c_set(nd, start, cap);
    return OK;
}

/* Items above the innermost MARK: the C unpickler refuses to pop below it, so do we. */
static inline size_t fence(const VM *vm) { return vm->mn ? vm->marks[vm->mn - 1] : 0; }

/* n bytes at the cursor, or DECLINE when the file ends first or one read crosses the end of
 * a protocol-4 frame (stricter than the C unpickler, which ignores frames: declining is
 * safe). One comparison on the common path: a frame's end is dealt with when reached. */
static inline int take(VM *vm, size_t n, const uint8_t **out) {
    if (n > vm->end - vm->pos) {
        if (!vm->frame_end || vm->pos != vm->frame_end) return DECLINE; /* EOF, or straddles */
        vm->frame_end = 0; /* the frame is used up: read on from the file */
        vm->end = vm->len;
        if (n > vm->end - vm->pos) return DECLINE;
    }
    *out = vm->buf + vm->pos;
    vm->pos += n;
    return OK;
}

static inline uint64_t le(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static inline uint32_t le2(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }

static inline uint32_t le4(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Strict UTF-8 except that encoded surrogates pass, as the unpickler's "surrogatepass". */
static int utf8_ok(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
        } else if (c >= 0xC2 && c <= 0xDF) {
            if (n - i < 2 || (s[i + 1] & 0xC0) != 0x80) return 0;
            i += 2;
        } else if (c >= 0xE0 && c <= 0xEF) {
            if (n - i < 3 || (s[i + 1] & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80) return 0;
            if (c == 0xE0 && s[i + 1] < 0xA0) return 0; /* overlong */
            i += 3;
        } else if (c >= 0xF0 && c <= 0xF4) {
            if (n - i < 4 || (s[i + 1] & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80 ||
                (s[i + 3] & 0xC0) != 0x80)
                return 0;
            if (c == 0xF0 && s[i + 1] < 0x90) return 0; /* overlong */
            if (c == 0xF4 && s[i + 1] > 0x8F) return 0; /* above U+10FFFF */
            i += 4;
        } else {
            return 0;
        }
    }
    return 1;
}

static int string_op(VM *vm, size_t lenbytes) {
    const uint8_t *p, *s;
    TRY(take(vm, lenbytes, &p));
    uint64_t n = le(p, (int)lenbytes);
    if (n > vm->len - vm->pos || n > UINT32_MAX) return DECLINE; /* a length that lies */
    size_t off = vm->pos;
    TRY(take(vm, (size_t)n, &s));
    if (!utf8_ok(s, (size_t)n)) return DECLINE;
    int32_t node;
    TRY(new_node(vm, N_STR, (int64_t)off, (uint32_t)n, &node));
    return push(vm, node);
}

static inline int int_node(VM *vm, int64_t v) {
    int32_t node;
    TRY(new_node(vm, N_INT, v, 0, &node));
    return push(vm, node);
}

static inline int memo_put(VM *vm, uint64_t idx) {
    if (vm->sn <= fence(vm)) return DECLINE;
    /* A real pickle numbers its memo from 0, one per PUT: an index beyond the file's size is
     * a lie, refused before it can size an allocation (the Python path then reports it). */
    if (idx >= vm->len) return DECLINE;
    if (idx >= vm->memocap) {
        size_t old = vm->memocap;
        TRY(grow((void **)&vm->memo, &vm->memocap, (size_t)idx + 1, sizeof(int32_t)));
        for (size_t i = old; i < vm->memocap; i++) vm->memo[i] = -1;
    }
    if (vm->memo[idx] < 0) vm->memo_len++;
    vm->memo[idx] = vm->stack[vm->sn - 1];
    return OK;
}

static inline int memo_get(VM *vm, uint64_t idx) {
    if (idx >= vm->memocap || vm->memo[idx] < 0) return DECLINE;
    return push(vm, vm->memo[idx]);
}

/* Dict keys the unpickler could hash; containers (even tuples) are refused to stay simple. */
static inline int hashable_key(const VM *vm, int32_t key) {
    uint8_t k = vm->nodes[key].kind;
    return k == N_STR || k == N_INT || k == N_NONE || k == N_TRUE || k == N_FALSE ||
           k == N_FLOAT;
}

static int make_tuple(VM *vm, size_t from) {
    int32_t t;
    TRY(new_node(vm, N_TUPLE, 0, 0, &t));
    if (vm->sn > from) TRY(add_children(vm, t, vm->stack + from, vm->sn - from));
    vm->sn = from;
    return push(vm, t);
}

static inline int pop_mark(VM *vm, size_t *k) {
    if (!vm->mn) return DECLINE;
    *k = vm->marks[--vm->mn];
    return OK;
}

/* Run the VM to STOP; *root is the value STOP returns. */
static int run(VM *vm, int32_t *root) {
    const uint8_t *p;
    int32_t node;
    size_t k;
    for (;;) {
        size_t at = vm->pos;
        TRY(take(vm, 1, &p));
        uint8_t op = *p;
        switch (op) {
        case 0x80: /* PROTO: only as the first opcode, as every dump writes it */
            TRY(take(vm, 1, &p));
            if (at != 0 || *p > 5) return DECLINE;
            break;
        case 0x95: { /* FRAME */
            TRY(take(vm, 8, &p));
            uint64_t n = le(p, 8);
            if ((vm->frame_end && vm->pos < vm->frame_end) || n > vm->len - vm->pos)
                return DECLINE; /* a frame inside a frame, or longer than the file */
            vm->frame_end = n ? vm->pos + (size_t)n : 0;
            vm->end = n ? vm->frame_end : vm->len;
            break;
        }
        case '.': /* STOP: exactly one value, no open MARK */
            if (vm->sn != 1 || vm->mn) return DECLINE;
            *root = vm->stack[0];
            return OK;
        case '(': /* MARK */
            TRY(grow((void **)&vm->marks, &vm->mcap, vm->mn + 1, sizeof(size_t)));
            vm->marks[vm->mn++] = vm->sn;
            break;
        case '}':
            TRY(new_node(vm, N_DICT, 0, 0, &node));
            TRY(push(vm, node));
            break;
        case ']':
            TRY(new_node(vm, N_LIST, 0, 0, &node));
            TRY(push(vm, node));
            break;
        case ')':
            TRY(new_node(vm, N_TUPLE, 0, 0, &node));
            TRY(push(vm, node));
            break;
        case 't': /* TUPLE */
            TRY(pop_mark(vm, &k));
            TRY(make_tuple(vm, k));
            break;
        case 0x85: /* TUPLE1 */
        case 0x86: /* TUPLE2 */
        case 0x87: /* TUPLE3 */ {
            size_t m = (size_t)(op - 0x84);
            if (vm->sn - fence(vm) < m) return DECLINE;
            TRY(make_tuple(vm, vm->sn - m));
            break;
        }
        case 's': { /* SETITEM */
            if (vm->sn - fence(vm) < 3) return DECLINE;
            int32_t d = vm->stack[vm->sn - 3], key = vm->stack[vm->sn - 2];
            if (vm->nodes[d].kind != N_DICT || !hashable_key(vm, key)) return DECLINE;
            TRY(add_children(vm, d, vm->stack + vm->sn - 2, 2));
            vm->sn -= 2;
            break;
        }
        case 'u': { /* SETITEMS */
            TRY(pop_mark(vm, &k));
            if (k == 0 || k - 1 < fence(vm) || (vm->sn - k) % 2) return DECLINE;
            int32_t d = vm->stack[k - 1];
            if (vm->nodes[d].kind != N_DICT) return DECLINE;
            for (size_t i = k; i < vm->sn; i += 2)
                if (!hashable_key(vm, vm->stack[i])) return DECLINE;
            if (vm->sn > k) TRY(add_children(vm, d, vm->stack + k, vm->sn - k));
            vm->sn = k;
            break;
        }
        case 'a': { /* APPEND */
            if (vm->sn - fence(vm) < 2) return DECLINE;
            int32_t l = vm->stack[vm->sn - 2];
            if (vm->nodes[l].kind != N_LIST) return DECLINE;
            TRY(add_children(vm, l, vm->stack + vm->sn - 1, 1));
            vm->sn -= 1;
            break;
        }
        case 'e': { /* APPENDS */
            TRY(pop_mark(vm, &k));
            if (k == 0 || k - 1 < fence(vm)) return DECLINE;
            int32_t l = vm->stack[k - 1];
            if (vm->nodes[l].kind != N_LIST) return DECLINE;
            if (vm->sn > k) TRY(add_children(vm, l, vm->stack + k, vm->sn - k));
            vm->sn = k;
            break;
        }
        case 'X': /* BINUNICODE */
            TRY(string_op(vm, 4));
            break;
        case 0x8c: /* SHORT_BINUNICODE */
            TRY(string_op(vm, 1));
            break;
        case 0x8d: /* BINUNICODE8 */
            TRY(string_op(vm, 8));
            break;
        case 'J': /* BININT */
            TRY(take(vm, 4, &p));
            TRY(int_node(vm, (int64_t)(int32_t)le4(p)));
            break;
        case 'K': /* BININT1 */
            TRY(take(vm, 1, &p));
            TRY(int_node(vm, p[0]));
            break;
        case 'M': /* BININT2 */
            TRY(take(vm, 2, &p));
            TRY(int_node(vm, (int64_t)le2(p)));
            break;
        case 0x8a: { /* LONG1: little-endian two's complement; int64 at most */
            TRY(take(vm, 1, &p));
            int n = p[0];
            if (n > 8) return DECLINE;
            TRY(take(vm, (size_t)n, &p));
            uint64_t u = le(p, n);
            if (n && n < 8 && (p[n - 1] & 0x80)) u |= ~(uint64_t)0 << (8 * n); /* sign */
            int64_t v;
            memcpy(&v, &u, sizeof v);
            TRY(int_node(vm, v));
            break;
        }
        case 'G': { /* BINFLOAT: big-endian IEEE double, kept as bits */
            TRY(take(vm, 8, &p));
            uint64_t u = 0;
            for (int i = 0; i < 8; i++) u = (u << 8) | p[i];
            TRY(new_node(vm, N_FLOAT, (int64_t)u, 0, &node));
            TRY(push(vm, node));
            break;
        }
        case 'N':
            TRY(push(vm, 0)); /* nodes 0, 1, 2 are None, False, True */
            break;
        case 0x89: /* NEWFALSE */
            TRY(push(vm, 1));
            break;
        case 0x88: /* NEWTRUE */
            TRY(push(vm, 2));
            break;
        case 'q': /* BINPUT */
            TRY(take(vm, 1, &p));
            TRY(memo_put(vm, p[0]));
            break;
        case 'r': /* LONG_BINPUT */
            TRY(take(vm, 4, &p));
            TRY(memo_put(vm, le4(p)));
            break;
        case 0x94: /* MEMOIZE */
            TRY(memo_put(vm, vm->memo_len));
            break;
        case 'h': /* BINGET */
            TRY(take(vm, 1, &p));
            TRY(memo_get(vm, p[0]));
            break;
        case 'j': /* LONG_BINGET */
            TRY(take(vm, 4, &p));
            TRY(memo_get(vm, le4(p)));
            break;
        default:
            return DECLINE; /* GLOBAL, REDUCE, anything else: the Python path decides */
        }
    }
}

static inline uint32_t n_kids(const VM *vm, int32_t node) { return vm->nodes[node].b; }

static inline const int32_t *kids_of(const VM *vm, int32_t node) {
    return vm->kids + c_start(&vm->nodes[node]);
}

/* ---- hash-consing: one canonical id per distinct value ---------------------------------- */
enum { K_NONE, K_FALSE, K_TRUE, K_INT, K_STR, K_LIST, K_TUPLE, K_STACK };
#define INT_CACHE_BITS 10
/* What a canonical value is, as the fields' types need it (computed bottom-up). */
enum {
    S_OTHER, S_NONE, S_BOOL, S_INT, S_STR, S_LIST_EMPTY, S_LIST_INT, S_LIST_STR,
    S_LIST_LIST_INT, S_PAIR_STR
};

typedef struct {
    uint64_t hash;
    int64_t off; /* INT: value; STR: input offset; containers: offset into the word pool */
    uint32_t len;
    uint8_t kind, sig;
} Canon;

typedef struct {
    VM *vm;
    Canon *c;
    size_t cn, ccap;
    int64_t *pool;
    size_t pn, pcap;
    uint32_t *table; /* open addressing: canonical id + 1, 0 empty */
    size_t tcap;
    int32_t *value_of; /* node -> canonical value id (-1: not yet) */
    int32_t *stack_of; /* stack list node -> canonical id; frame dict node -> its frame */
    int64_t *frames;   /* per frame dict read: name id, filename id, line (3 words each) */
    size_t fn, fcap;
    int8_t *field_of;  /* key node -> field index (-2: not yet, -1: not a field) */
    PyObject **py;     /* canonical id -> Python object, built once */
    int64_t int_val[1 << INT_CACHE_BITS]; /* value_canon's cache of int ids (-1: empty) */
    int32_t int_id[1 << INT_CACHE_BITS];
    size_t pycap;
} Cons;

static inline uint64_t mix(uint64_t h, uint64_t x) {
    h ^= x + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2);
    return h * 0xFF51AFD7ED558CCDULL;
}

static uint64_t bytes_hash(const uint8_t *s, size_t n) {
    uint64_t h = 0xCBF29CE484222325ULL; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 0x100000001B3ULL;
    return h;
}

static int same(const Cons *k, const Canon *c, uint8_t kind, const int64_t *words, uint32_t n,
                int64_t scalar) {
    if (c->kind != kind || c->len != n) return 0;
    if (kind == K_STR)
        return memcmp(k->vm->buf + c->off, k->vm->buf + scalar, n) == 0;
    if (kind == K_INT) return c->off == scalar;
    return n == 0 || memcmp(k->pool + c->off, words, n * sizeof(int64_t)) == 0;
}

static int rehash(Cons *k) {
    size_t cap = k->tcap ? k->tcap * 2 : 1024;
    uint32_t *t = calloc(cap, sizeof(uint32_t));
    if (!t) return DECLINE;
    for (size_t i = 0; i < k->cn; i++) {
        size_t j = (size_t)k->c[i].hash & (cap - 1);
        while (t[j]) j = (j + 1) & (cap - 1);
        t[j] = (uint32_t)i + 1;
    }
    free(k->table);
    k->table = t;
    k->tcap = cap;
    return OK;
}

/* The canonical id of (kind, payload): STR payload is input bytes at `scalar` (length n),
 * INT is `scalar`, containers are the n canonical ids in `words`. */
static int intern_canon(Cons *k, uint8_t kind, uint8_t sig, const int64_t *words, uint32_t n,
                        int64_t scalar, int32_t *out) {
    uint64_t h = mix(kind, n);
    if (kind == K_STR)
        h = mix(h, bytes_hash(k->vm->buf + scalar, n));
    else if (kind == K_INT)
        h = mix(h, (uint64_t)scalar);
    else
        for (uint32_t i = 0; i < n; i++) h = mix(h, (uint64_t)words[i]);
    /* murmur3's finalizer: the table indexes by the low bits, which mix() leaves weak
     * (shapes like 2048 and 4096 would share a chain) */
    h ^= h >> 33;
    h *= 0xFF51AFD7ED558CCDULL;
    h ^= h >> 33;
    h *= 0xC4CEB9FE1A85EC53ULL;
    h ^= h >> 33;
    if ((k->cn + 1) * 2 > k->tcap) TRY(rehash(k));
    size_t j = (size_t)h & (k->tcap - 1);
    while (k->table[j]) {
        const Canon *c = &k->c[k->table[j] - 1];
        if (c->hash == h && same(k, c, kind, words, n, scalar)) {
            *out = (int32_t)(k->table[j] - 1);
            return OK;
        }
        j = (j + 1) & (k->tcap - 1);
    }
    if (k->cn >= INT32_MAX - 1) return DECLINE;
    TRY(grow((void **)&k->c, &k->ccap, k->cn + 1, sizeof(Canon)));
    Canon *c = &k->c[k->cn];
    c->hash = h;
    c->len = n;
    c->kind = kind;
    c->sig = sig;
    if (kind == K_STR || kind == K_INT) {
        c->off = scalar;
    } else {
        TRY(grow((void **)&k->pool, &k->pcap, k->pn + n + 1, sizeof(int64_t)));
        if (n) memcpy(k->pool + k->pn, words, n * sizeof(int64_t));
        c->off = (int64_t)k->pn;
        k->pn += n;
    }
    k->table[j] = (uint32_t)k->cn + 1;
    *out = (int32_t)k->cn++;
    return OK;
}

/* Lists up to this long hash-cons from a buffer on the C stack (shapes, dtypes, stacks). */
#define SMALL 64

/* Call-site values hold containers at most two deep (shapes: list of lists of ints). */
#define MAX_VALUE_DEPTH 3

/* The canonical id of a call-site value. Floats and dicts never occur there: refused. */
static int value_canon(Cons *k, int32_t node, int depth, size_t max_list, int32_t *out) {
    VM *vm = k->vm;
    if (k->value_of[node] >= 0) {
        *out = k->value_of[node];
        return OK;
    }
    const Node *nd = &vm->nodes[node];
    int32_t id;
    switch (nd->kind) {
    case N_NONE:
        TRY(intern_canon(k, K_NONE, S_NONE, NULL, 0, 0, &id));
        break;
    case N_FALSE:
        TRY(intern_canon(k, K_FALSE, S_BOOL, NULL, 0, 0, &id));
        break;
    case N_TRUE:
        TRY(intern_canon(k, K_TRUE, S_BOOL, NULL, 0, 0, &id));
        break;
    case N_INT: { /* a fresh node per entry, but few values: a direct-mapped cache first */
        size_t slot = (size_t)(((uint64_t)nd->a * 0x9E3779B97F4A7C15ULL) >> (64 - INT_CACHE_BITS));
        if (k->int_id[slot] >= 0 && k->int_val[slot] == nd->a) {
            id = k->int_id[slot];
        } else {
            TRY(intern_canon(k, K_INT, S_INT, NULL, 0, nd->a, &id));
            k->int_val[slot] = nd->a;
            k->int_id[slot] = id;
        }
        break;
    }
    case N_STR:
        TRY(intern_canon(k, K_STR, S_STR, NULL, nd->b, nd->a, &id));
        break;
    case N_LIST:
    case N_TUPLE: {
        uint32_t n = n_kids(vm, node);
        if (depth >= MAX_VALUE_DEPTH || n > max_list) return DECLINE;
        int64_t small[SMALL], *words = n <= SMALL ? small : malloc(n * sizeof(int64_t));
        if (!words) return DECLINE;
        int all_int = 1, all_str = 1, all_shape = 1;
        const int32_t *ch = kids_of(vm, node);
        for (uint32_t i = 0; i < n; i++) {
            int32_t sub;
            sub = k->value_of[ch[i]];
            if (sub < 0 && value_canon(k, ch[i], depth + 1, max_list, &sub) != OK) {
                if (words != small) free(words);
                return DECLINE;
            }
            words[i] = sub;
            uint8_t s = k->c[sub].sig;
            all_int &= s == S_INT;
            all_str &= s == S_STR;
            all_shape &= s == S_LIST_INT || s == S_LIST_EMPTY;
        }
        uint8_t sig;
        if (nd->kind == N_TUPLE)
            sig = (n == 2 && all_str) ? S_PAIR_STR : S_OTHER;
        else if (n == 0)
            sig = S_LIST_EMPTY;
        else
            sig = all_int ? S_LIST_INT : all_str ? S_LIST_STR : all_shape ? S_LIST_LIST_INT
                                                                            : S_OTHER;
        int rc = intern_canon(k, nd->kind == N_LIST ? K_LIST : K_TUPLE, sig, words, n, 0, &id);
        if (words != small) free(words);
        TRY(rc);
        break;
    }
    default:
        return DECLINE;
    }
    k->value_of[node] = id;
    *out = id;
    return OK;
}

/* ---- the entry schema ------------------------------------------------------------------ */
/* Order matters: the integer fields first (as INT_FIELDS, then the seq_id of formats before
 * 2.0, read only to refuse them), then duration and frames, then the call-site composite in
 * columns.COMPOSITE's order. columns.FAST_FIELDS declares the same list: the module exports
 * this copy (FIELDS, FRAME_FIELDS, N_INTS) and columns.py uses the module only if they agree. */
enum { NINT = 8, NCOMP = 13 };
enum { F_DURATION = NINT, F_FRAMES, F_COMP, NFIELDS = F_COMP + NCOMP };
/* After the entry fields: a frame's keys (looked up through the same per-node cache). */
enum { K_NAME = NFIELDS, K_FILENAME, K_LINE, NKEYS };
static const char *const FIELD_NAMES[NKEYS] = {
    "record_id", "collective_seq_id", "p2p_seq_id", "op_id", "time_created_ns",
    "time_discovered_started_ns", "time_discovered_completed_ns", "seq_id",
    "duration_ms", "frames",
    "process_group", "profiling_name", "state", "input_sizes", "output_sizes", "input_dtypes",
    "output_dtypes", "thread_id", "thread_name", "is_p2p", "retired", "timeout_ms", "pg_id",
    "name", "filename", "line",
};
/* The types each call-site field holds in real dumps (bit per S_*); others decline. */
#define B(s) (1u << (s))
static const unsigned COMP_OK[NCOMP] = {
    B(S_PAIR_STR),                                       /* process_group */
    B(S_STR) | B(S_NONE),                                /* profiling_name */
    B(S_STR) | B(S_NONE),                                /* state */
    B(S_NONE) | B(S_LIST_EMPTY) | B(S_LIST_LIST_INT),    /* input_sizes */
    B(S_NONE) | B(S_LIST_EMPTY) | B(S_LIST_LIST_INT),    /* output_sizes */
    B(S_NONE) | B(S_LIST_EMPTY) | B(S_LIST_STR),         /* input_dtypes */
    B(S_NONE) | B(S_LIST_EMPTY) | B(S_LIST_STR),         /* output_dtypes */
    B(S_STR) | B(S_NONE),                                /* thread_id */
    B(S_STR) | B(S_NONE),                                /* thread_name */
    B(S_BOOL) | B(S_NONE),                               /* is_p2p */
    B(S_BOOL) | B(S_NONE),                               /* retired */
    B(S_INT) | B(S_NONE),                                /* timeout_ms */
    B(S_INT) | B(S_NONE),                                /* pg_id */
};

static inline int8_t field_index(Cons *k, int32_t key) {
    if (k->field_of[key] != -2) return k->field_of[key];
    const Node *nd = &k->vm->nodes[key];
    int8_t f = -1;
    for (int i = 0; i < NKEYS; i++) {
        size_t n = strlen(FIELD_NAMES[i]);
        if (nd->b == n && memcmp(k->vm->buf + nd->a, FIELD_NAMES[i], n) == 0) {
            f = (int8_t)i;
            break;
        }
    }
    k->field_of[key] = f;
    return f;
}

static int key_is(const VM *vm, int32_t key, const char *name) {
    const Node *nd = &vm->nodes[key];
    size_t n = strlen(name);
    return nd->kind == N_STR && nd->b == n && memcmp(vm->buf + nd->a, name, n) == 0;
}

/* A frame: a dict of exactly name (str), filename (str), line (int32), in any order, read
 * once per dict node into three words (torch shares frame dicts through the memo; Python's
 * pickler writes a fresh dict per entry, so frames are not hash-consed one by one: the stack
 * is, over all its frames' words at once). */
static int frame_words(Cons *k, int32_t node, const int64_t **out) {
    VM *vm = k->vm;
    if (k->stack_of[node] >= 0) {
        *out = k->frames + 3 * (size_t)k->stack_of[node];
        return OK;
    }
    if (vm->nodes[node].kind != N_DICT) return DECLINE;
    int32_t slot[3] = {-1, -1, -1};
    const int32_t *ch = kids_of(vm, node);
    uint32_t n = n_kids(vm, node);
    for (uint32_t i = 0; i < n; i += 2) {
        if (vm->nodes[ch[i]].kind != N_STR) return DECLINE;
        int s = field_index(k, ch[i]) - K_NAME;
        if (s < 0) return DECLINE; /* another key: == would see it, the stack check not */
        slot[s] = ch[i + 1];
    }
    if (slot[0] < 0 || slot[1] < 0 || slot[2] < 0) return DECLINE;
    const Node *name = &vm->nodes[slot[0]], *file = &vm->nodes[slot[1]];
    const Node *line = &vm->nodes[slot[2]];
    if (name->kind != N_STR || file->kind != N_STR || line->kind != N_INT) return DECLINE;
    if (line->a < INT32_MIN || line->a > INT32_MAX) return DECLINE;
    if (k->fn >= INT32_MAX) return DECLINE;
    TRY(grow((void **)&k->frames, &k->fcap, 3 * (k->fn + 1), sizeof(int64_t)));
    int64_t *w = k->frames + 3 * k->fn;
    int32_t id;
    /* the strings through value_canon, whose per-node cache hashes a memoized name once */
    TRY(value_canon(k, slot[0], 0, 0, &id));
    w[0] = id;
    TRY(value_canon(k, slot[1], 0, 0, &id));
    w[1] = id;
    w[2] = line->a;
    k->stack_of[node] = (int32_t)k->fn++;
    *out = w;
    return OK;
}

static int stack_canon(Cons *k, int32_t node, size_t max_frames, int32_t *out) {
    VM *vm = k->vm;
    if (k->stack_of[node] >= 0) {
        *out = k->stack_of[node];
        return OK;
    }
    uint32_t n = n_kids(vm, node);
    if (n > max_frames) return DECLINE; /* the Python path cuts it, with a note */
    size_t nw = 3 * (size_t)n;
    int64_t small[3 * SMALL], *words = nw <= 3 * SMALL ? small : malloc(nw * sizeof(int64_t));
    if (!words) return DECLINE;
    const int32_t *ch = kids_of(vm, node);
    for (uint32_t i = 0; i < n; i++) {
        const int64_t *f;
        if (frame_words(k, ch[i], &f) != OK) {
            if (words != small) free(words);
            return DECLINE;
        }
        words[3 * (size_t)i] = f[0];
        words[3 * (size_t)i + 1] = f[1];
        words[3 * (size_t)i + 2] = f[2];
    }
    int32_t id;
    int rc = nw > UINT32_MAX ? DECLINE  /* an empty stack hashes no words: pass none */
             : intern_canon(k, K_STACK, S_OTHER, n ? words : NULL, (uint32_t)nw, 0, &id);
    if (words != small) free(words);
    TRY(rc);
    k->stack_of[node] = id;
    *out = id;
    return OK;
}

/* ---- back to Python -------------------------------------------------------------------- */
static PyObject *canon_py(Cons *k, int32_t id);

static PyObject *canon_seq(Cons *k, const Canon *c, int as_tuple) {
    PyObject *seq = as_tuple ? PyTuple_New(c->len) : PyList_New(c->len);
    if (!seq) return NULL;
    for (uint32_t i = 0; i < c->len; i++) {
        PyObject *item = canon_py(k, (int32_t)k->pool[c->off + i]);
        if (!item) {
            Py_DECREF(seq);
            return NULL;
        }
        Py_INCREF(item);
        if (as_tuple)
            PyTuple_SET_ITEM(seq, i, item);
        else
            PyList_SET_ITEM(seq, i, item);
    }
    return seq;
}

/* A borrowed reference to the Python value of a canonical id, built once. The depth is
 * bounded by construction (values nest 3 deep, stacks 3). */
static PyObject *canon_py(Cons *k, int32_t id) {
    if (k->py[id]) return k->py[id];
    const Canon *c = &k->c[id];
    PyObject *o = NULL;
    switch (c->kind) {
    case K_NONE:
        o = Py_NewRef(Py_None);
        break;
    case K_FALSE:
        o = Py_NewRef(Py_False);
        break;
    case K_TRUE:
        o = Py_NewRef(Py_True);
        break;
    case K_INT:
        o = PyLong_FromLongLong(c->off);
        break;
    case K_STR:
        o = PyUnicode_DecodeUTF8((const char *)k->vm->buf + c->off, c->len, "surrogatepass");
        break;
    case K_LIST:
        o = canon_seq(k, c, 0);
        break;
    case K_TUPLE:
        o = canon_seq(k, c, 1);
        break;
    case K_STACK: /* a tuple of (name, filename, line), from three words per frame */
        o = PyTuple_New(c->len / 3);
        for (uint32_t i = 0; o && i < c->len / 3; i++) {
            const int64_t *w = k->pool + c->off + 3 * (size_t)i;
            PyObject *name = canon_py(k, (int32_t)w[0]);
            PyObject *file = name ? canon_py(k, (int32_t)w[1]) : NULL;
            PyObject *frame = file ? Py_BuildValue("(OOL)", name, file, (long long)w[2]) : NULL;
            if (frame)
                PyTuple_SET_ITEM(o, i, frame);
            else
                Py_CLEAR(o);
        }
        break;
    }
    k->py[id] = o;
    return o;
}

/* Top-level metadata (pg_config, pg_status, version) as the unpickler would build it:
 * shared nodes stay shared (the cache), a cycle or deep nesting declines. */
#define MAX_META_DEPTH 16

static PyObject *node_py(VM *vm, int32_t node, PyObject *cache, int32_t *path, int depth) {
    const Node *nd = &vm->nodes[node];
    switch (nd->kind) {
    case N_NONE:
        return Py_NewRef(Py_None);
    case N_FALSE:
        return Py_NewRef(Py_False);
    case N_TRUE:
        return Py_NewRef(Py_True);
    case N_INT:
        return PyLong_FromLongLong(nd->a);
    case N_FLOAT: {
        double d;
        uint64_t u = (uint64_t)nd->a;
        memcpy(&d, &u, sizeof d);
        return PyFloat_FromDouble(d);
    }
    case N_STR:
        return PyUnicode_DecodeUTF8((const char *)vm->buf + nd->a, nd->b, "surrogatepass");
    default:
        break;
    }
    PyObject *key = PyLong_FromLong(node);
    if (!key) return NULL;
    PyObject *hit = PyDict_GetItemWithError(cache, key);
    if (hit || PyErr_Occurred()) {
        Py_DECREF(key);
        return hit ? Py_NewRef(hit) : NULL;
    }
    for (int i = 0; i < depth; i++)
        if (path[i] == node) hit = Py_None; /* a cycle */
    if (hit || depth >= MAX_META_DEPTH) {
        Py_DECREF(key);
        PyErr_SetString(PyExc_ValueError, "cycle or too deep");
        return NULL;
    }
    path[depth] = node;
    uint32_t n = n_kids(vm, node);
    const int32_t *ch = kids_of(vm, node);
    PyObject *out = NULL;
    if (nd->kind == N_DICT) {
        out = PyDict_New();
        for (uint32_t i = 0; out && i < n; i += 2) {
            PyObject *kk = node_py(vm, ch[i], cache, path, depth + 1);
            PyObject *vv = kk ? node_py(vm, ch[i + 1], cache, path, depth + 1) : NULL;
            if (!vv || PyDict_SetItem(out, kk, vv) < 0) Py_CLEAR(out);
            Py_XDECREF(kk);
            Py_XDECREF(vv);
        }
    } else {
        out = nd->kind == N_LIST ? PyList_New(n) : PyTuple_New(n);
        for (uint32_t i = 0; out && i < n; i++) {
            PyObject *item = node_py(vm, ch[i], cache, path, depth + 1);
            if (!item)
                Py_CLEAR(out);
            else if (nd->kind == N_LIST)
                PyList_SET_ITEM(out, i, item);
            else
                PyTuple_SET_ITEM(out, i, item);
        }
    }
    if (out && PyDict_SetItem(cache, key, out) < 0) Py_CLEAR(out);
    Py_DECREF(key);
    return out;
}

/* ---- parse() --------------------------------------------------------------------------- */
typedef struct {
    size_t n;
    int64_t *ints;     /* NINT x n */
    uint8_t *state;    /* NINT x n: 0 an int, 1 None, 2 absent */
    double *duration;  /* n: NaN when None or absent */
    int32_t *canon;    /* (1 + NCOMP) x n: the stack, then each call-site field */
    long long frames_total;
    unsigned absent;   /* bit per call-site field absent from some entry */
} Cols;

static int default_canons(Cons *k, int32_t def[NCOMP]) {
    int32_t none, empty, f;
    TRY(intern_canon(k, K_NONE, S_NONE, NULL, 0, 0, &none));
    TRY(intern_canon(k, K_STR, S_STR, NULL, 0, 0, &empty));
    TRY(intern_canon(k, K_FALSE, S_BOOL, NULL, 0, 0, &f));
    int64_t pair[2] = {empty, empty};
    int32_t pg;
    TRY(intern_canon(k, K_TUPLE, S_PAIR_STR, pair, 2, 0, &pg));
    /* columns._DEFAULTS: what a missing call-site field reads as */
    const int32_t d[NCOMP] = {pg, empty, empty, none, none, none, none, empty, empty, f, f,
                              none, none};
    memcpy(def, d, sizeof d);
    return OK;
}

static int walk_entries(Cons *k, int32_t entries, Cols *cols, size_t max_entries,
                        size_t max_list, size_t max_frames) {
    VM *vm = k->vm;
    size_t n = n_kids(vm, entries);
    if (n > max_entries) return DECLINE;
    cols->n = n;
    size_t m = n ? n : 1;
    cols->ints = malloc(NINT * m * sizeof(int64_t));
    cols->state = malloc(NINT * m);
    cols->duration = malloc(m * sizeof(double));
    cols->canon = malloc((1 + NCOMP) * m * sizeof(int32_t));
    if (!cols->ints || !cols->state || !cols->duration || !cols->canon) return DECLINE;
    int32_t def[NCOMP], none;
    TRY(default_canons(k, def));
    none = def[3];
    const int32_t *ents = kids_of(vm, entries);
    for (size_t e = 0; e < n; e++) {
        int32_t d = ents[e];
        if (vm->nodes[d].kind != N_DICT) return DECLINE;
        int32_t slot[NFIELDS];
        for (int f = 0; f < NFIELDS; f++) slot[f] = -1;
        const int32_t *ch = kids_of(vm, d);
        uint32_t nk = n_kids(vm, d);
        for (uint32_t i = 0; i < nk; i += 2) {
            if (vm->nodes[ch[i]].kind != N_STR) return DECLINE;
            int8_t f = field_index(k, ch[i]);
            if (f >= 0 && f < NFIELDS) slot[f] = ch[i + 1]; /* repeated: the last wins */
        }
        for (int f = 0; f < NINT; f++) {
            int64_t v = 0;
            uint8_t st = 2;
            if (slot[f] >= 0) {
                const Node *nd = &vm->nodes[slot[f]];
                if (nd->kind == N_INT) {
                    v = nd->a;
                    st = 0;
                } else if (nd->kind == N_NONE) {
                    st = 1;
                } else {
                    return DECLINE; /* bool, float, str: the Python path converts or fails */
                }
            }
            cols->ints[f * n + e] = v;
            cols->state[f * n + e] = st;
        }
        double dur = NAN;
        if (slot[F_DURATION] >= 0) {
            const Node *nd = &vm->nodes[slot[F_DURATION]];
            if (nd->kind == N_FLOAT) {
                uint64_t u = (uint64_t)nd->a;
                memcpy(&dur, &u, sizeof dur);
            } else if (nd->kind == N_INT) {
                dur = (double)nd->a;
            } else if (nd->kind != N_NONE) {
                return DECLINE;
            }
        }
        cols->duration[e] = dur;
        int32_t st = none;
        if (slot[F_FRAMES] >= 0) {
            const Node *nd = &vm->nodes[slot[F_FRAMES]];
            if (nd->kind == N_LIST) {
                TRY(stack_canon(k, slot[F_FRAMES], max_frames, &st));
                cols->frames_total += n_kids(vm, slot[F_FRAMES]);
            } else if (nd->kind != N_NONE) {
                return DECLINE;
            }
        }
        cols->canon[e] = st;
        for (int f = 0; f < NCOMP; f++) {
            int32_t id = def[f];
            int32_t v = slot[F_COMP + f];
            if (v < 0) {
                cols->absent |= 1u << f;
            } else {
                id = k->value_of[v];
                if (id < 0) TRY(value_canon(k, v, 0, max_list, &id));
                if (!(COMP_OK[f] & B(k->c[id].sig))) return DECLINE;
            }
            cols->canon[(size_t)(1 + f) * n + e] = id;
        }
    }
    return OK;
}

/* First-seen codes of one column of canonical ids, and its table of Python values. */
static PyObject *code_column(Cons *k, const int32_t *ids, size_t n, int32_t *codes,
                             int32_t *seen, int stacks) {
    PyObject *table = PyList_New(0);
    if (!table) return NULL;
    int32_t next = 0;
    for (size_t e = 0; e < n; e++) {
        int32_t id = ids[e];
        if (seen[id] < 0) {
            seen[id] = next++;
            /* a missing or None stack stays None: columnize keeps it apart from [] */
            PyObject *o = (stacks && k->c[id].kind == K_NONE) ? Py_None : canon_py(k, id);
            if (!o || PyList_Append(table, o) < 0) {
                Py_DECREF(table);
                return NULL;
            }
        }
        codes[e] = seen[id];
    }
    for (size_t e = 0; e < n; e++) seen[ids[e]] = -1;
    return table;
}

static const char *const META_KEYS[] = {"version", "comm_lib_version", "pg_config",
                                        "pg_status"};

static PyObject *build_result(Cons *k, int32_t root, int32_t entries, Cols *cols) {
    VM *vm = k->vm;
    size_t n = cols->n;
    PyObject *top = PyDict_New(), *cache = PyDict_New();
    PyObject *result = NULL, *stack_table = NULL, *tables = NULL, *codes_bytes = NULL;
    PyObject *stack_codes = NULL;
    int32_t path[MAX_META_DEPTH];
    int32_t *seen = NULL;
    if (!top || !cache) goto done;
    const int32_t *ch = kids_of(vm, root);
    uint32_t nk = n_kids(vm, root);
    for (uint32_t i = 0; i < nk; i += 2) {
        for (size_t m = 0; m < sizeof META_KEYS / sizeof *META_KEYS; m++) {
            if (!key_is(vm, ch[i], META_KEYS[m])) continue;
            PyObject *v = node_py(vm, ch[i + 1], cache, path, 0);
            if (!v || PyDict_SetItemString(top, META_KEYS[m], v) < 0) {
                Py_XDECREF(v);
                goto done;
            }
            Py_DECREF(v);
        }
    }
    k->pycap = k->cn;
    k->py = calloc(k->cn ? k->cn : 1, sizeof(PyObject *));
    seen = malloc((k->cn ? k->cn : 1) * sizeof(int32_t));
    if (!k->py || !seen) {
        PyErr_NoMemory();
        goto done;
    }
    for (size_t i = 0; i < k->cn; i++) seen[i] = -1;
    stack_codes = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(n * sizeof(int32_t)));
    codes_bytes = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(NCOMP * n * sizeof(int32_t)));
    tables = PyList_New(NCOMP);
    if (!stack_codes || !codes_bytes || !tables) goto done;
    stack_table = code_column(k, cols->canon, n, (int32_t *)PyBytes_AS_STRING(stack_codes),
                              seen, 1);
    if (!stack_table) goto done;
    int32_t *codes = (int32_t *)PyBytes_AS_STRING(codes_bytes);
    for (int f = 0; f < NCOMP; f++) {
        PyObject *t = code_column(k, cols->canon + (size_t)(1 + f) * n, n, codes + f * n, seen,
                                  0);
        if (!t) goto done;
        PyList_SET_ITEM(tables, f, t);
    }
    result = Py_BuildValue(
        "(OOny#y#y#LOOOOI)", top, entries >= 0 ? Py_True : Py_False, (Py_ssize_t)n,
        (const char *)cols->ints, (Py_ssize_t)(NINT * n * sizeof(int64_t)),
        (const char *)cols->state, (Py_ssize_t)(NINT * n),
        (const char *)cols->duration, (Py_ssize_t)(n * sizeof(double)), cols->frames_total,
        stack_codes, stack_table, codes_bytes, tables, cols->absent);
done:
    free(seen);
    Py_XDECREF(top);
    Py_XDECREF(cache);
    Py_XDECREF(stack_codes);
    Py_XDECREF(stack_table);
    Py_XDECREF(codes_bytes);
    Py_XDECREF(tables);
    return result;
}

/* The big scratch arrays, kept from one call to the next: a parse worker reads file after
 * file, and fresh pages cost a fault each (about a sixth of a parse). Only the GIL holder
 * parses (the module never releases it), and no more than KEEP_BYTES stays behind. */
#define KEEP_BYTES (64u << 20)
static struct {
    Node *nodes;
    size_t ncap;
    int32_t *kids;
    size_t kcap;
    int32_t *stack;
    size_t scap;
    int32_t *memo;
    size_t memocap;
    int32_t *value_of, *stack_of;
    size_t vcap, vcap2;
    int8_t *field_of;
    size_t fcap;
} keep;

static void take_kept(VM *vm, Cons *k) {
    vm->nodes = keep.nodes, vm->ncap = keep.ncap;
    vm->kids = keep.kids, vm->kcap = keep.kcap;
    vm->stack = keep.stack, vm->scap = keep.scap;
    vm->memo = keep.memo, vm->memocap = keep.memocap;
    k->value_of = keep.value_of, k->stack_of = keep.stack_of, k->field_of = keep.field_of;
    memset(&keep, 0, sizeof keep);
    if (vm->memocap) memset(vm->memo, 0xFF, vm->memocap * sizeof(int32_t)); /* all -1 */
}

/* Keep the arrays for the next file, unless they are large or the file was declined (the
 * Python path then needs the worker's memory for itself), or another parse already gave its
 * own back (one run while this one built Python objects: a finalizer can run any code). */
static void give_back(VM *vm, Cons *k, size_t vcap, int declined) {
    size_t bytes = vm->ncap * sizeof(Node) + (vm->kcap + vm->scap + vm->memocap) * 4 + vcap * 9;
    int kept = keep.nodes || keep.kids || keep.stack || keep.memo || keep.value_of ||
               keep.stack_of || keep.field_of;
    if (declined || kept || bytes > KEEP_BYTES) {
        free(vm->nodes), free(vm->kids), free(vm->stack), free(vm->memo);
        free(k->value_of), free(k->stack_of), free(k->field_of);
        return;
    }
    keep.nodes = vm->nodes, keep.ncap = vm->ncap;
    keep.kids = vm->kids, keep.kcap = vm->kcap;
    keep.stack = vm->stack, keep.scap = vm->scap;
    keep.memo = vm->memo, keep.memocap = vm->memocap;
    keep.value_of = k->value_of, keep.stack_of = k->stack_of, keep.field_of = k->field_of;
    keep.vcap = vcap;
}

static PyObject *fastdump_parse(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    Py_ssize_t max_entries, max_list, max_frames;
    if (!PyArg_ParseTuple(args, "y*nnn", &view, &max_entries, &max_list, &max_frames))
        return NULL;
    VM vm;
    Cons k;
    Cols cols;
    memset(&vm, 0, sizeof vm);
    memset(&k, 0, sizeof k);
    memset(k.int_id, 0xFF, sizeof k.int_id);
    memset(&cols, 0, sizeof cols);
    PyObject *result = NULL;
    int32_t root, entries = -1, node;
    vm.buf = view.buf;
    vm.len = vm.end = (size_t)view.len;
    size_t vcap = keep.vcap;
    take_kept(&vm, &k);
    if (vm.len >= INT32_MAX || max_entries < 0 || max_list < 0 || max_frames < 0) goto decline;
    /* Room for what a dump of this size holds (about a node per 10 bytes, a child per 3),
     * so the arrays rarely move while they grow; capped, since address space counts against
     * the worker's limit before it is touched. */
    size_t room = vm.len < (64u << 20) ? vm.len : (64u << 20);
    if (grow((void **)&vm.nodes, &vm.ncap, room / 10 + 16, sizeof(Node)) ||
        grow((void **)&vm.kids, &vm.kcap, room / 3 + 16, sizeof(int32_t)))
        goto decline;
    /* nodes 0, 1, 2: the singletons None, False, True */
    if (new_node(&vm, N_NONE, 0, 0, &node) || new_node(&vm, N_FALSE, 0, 0, &node) ||
        new_node(&vm, N_TRUE, 0, 0, &node))
        goto decline;
    if (run(&vm, &root) != OK) goto decline;
    if (vm.nodes[root].kind != N_DICT) goto decline; /* validate() names what it is */
    {
        const int32_t *ch = kids_of(&vm, root);
        uint32_t nk = n_kids(&vm, root);
        for (uint32_t i = 0; i < nk; i += 2) {
            if (vm.nodes[ch[i]].kind != N_STR) goto decline;
            if (key_is(&vm, ch[i], "entries")) entries = ch[i + 1];
        }
    }
    if (entries >= 0 && vm.nodes[entries].kind != N_LIST) goto decline;
    k.vm = &vm;
    if (vm.nn > vcap) {
        free(k.value_of), free(k.stack_of), free(k.field_of);
        vcap = vm.nn;
        k.value_of = malloc(vcap * sizeof(int32_t));
        k.stack_of = malloc(vcap * sizeof(int32_t));
        k.field_of = malloc(vcap);
        if (!k.value_of || !k.stack_of || !k.field_of) goto decline;
    }
    for (size_t i = 0; i < vm.nn; i++) k.value_of[i] = k.stack_of[i] = -1;
    memset(k.field_of, -2, vm.nn);
    if (entries >= 0) {
        if (walk_entries(&k, entries, &cols, (size_t)max_entries, (size_t)max_list,
                         (size_t)max_frames) != OK)
            goto decline;
    } else {
        int32_t def[NCOMP];
        cols.ints = malloc(1);
        cols.state = malloc(1);
        cols.duration = malloc(1);
        cols.canon = malloc(1);
        if (!cols.ints || !cols.state || !cols.duration || !cols.canon) goto decline;
        if (default_canons(&k, def) != OK) goto decline;
    }
    result = build_result(&k, root, entries, &cols);
    if (!result) goto decline;
    goto cleanup;
decline:
    /* Whatever went wrong (a Python error while building values included), the Python path
     * reads the file again and says what it is. */
    PyErr_Clear();
    result = Py_NewRef(Py_None);
cleanup:
    if (k.py)
        for (size_t i = 0; i < k.pycap; i++) Py_XDECREF(k.py[i]);
    free(k.py);
    free(k.c);
    free(k.pool);
    free(k.frames);
    free(k.table);

    free(cols.ints);
    free(cols.state);
    free(cols.duration);
    free(cols.canon);
    free(vm.marks);
    if (!k.value_of || !k.stack_of || !k.field_of) { /* a failed allocation: keep nothing */
        free(k.value_of), free(k.stack_of), free(k.field_of);
        k.value_of = k.stack_of = NULL, k.field_of = NULL;
        vcap = 0;
    }
    give_back(&vm, &k, vcap, result == Py_None);
    PyBuffer_Release(&view);
    return result;
}

static PyObject *fastdump_release(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    free(keep.nodes), free(keep.kids), free(keep.stack), free(keep.memo);
    free(keep.value_of), free(keep.stack_of), free(keep.field_of);
    memset(&keep, 0, sizeof keep);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"release", fastdump_release, METH_NOARGS,
     "Free the scratch arrays kept between parses (before the Python path needs memory)."},
    {"parse", fastdump_parse, METH_VARARGS,
     "parse(data, max_entries, max_list_len, max_frames) -> tuple | None\n\n"
     "A Flight Recorder pickle as columns, or None when the Python path must decide."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_fastdump",
    "Flight Recorder pickles parsed straight into columns (see frtrace/tables/columns.py).", -1,
    methods, NULL, NULL, NULL, NULL,
};

/* FIELD_NAMES[from .. to) as a tuple of str. */
static PyObject *names_tuple(int from, int to) {
    PyObject *t = PyTuple_New(to - from);
    if (!t) return NULL;
    for (int i = from; i < to; i++) {
        PyObject *name = PyUnicode_FromString(FIELD_NAMES[i]);
        if (!name) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i - from, name);
    }
    return t;
}

/* Adds `value` as attribute `name` and drops the caller's reference, failed or not. */
static int add_steal(PyObject *m, const char *name, PyObject *value) {
    int rc = value ? PyModule_AddObjectRef(m, name, value) : -1;
    Py_XDECREF(value);
    return rc;
}

PyMODINIT_FUNC PyInit__fastdump(void) {
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    if (add_steal(m, "FIELDS", names_tuple(0, NFIELDS)) < 0 ||
        add_steal(m, "FRAME_FIELDS", names_tuple(NFIELDS, NKEYS)) < 0 ||
        add_steal(m, "N_INTS", PyLong_FromLong(NINT)) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
