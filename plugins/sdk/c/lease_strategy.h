/*
 * lease_strategy.h: a single-header, freestanding C SDK for leasehold
 * election strategies (ABI v1, see docs/plugins.md). No libc, no WASI: the
 * module imports only the lease_strategy host functions.
 *
 * Build (clang and lld from Debian; no wasi-libc needed):
 *   clang --target=wasm32 -O2 -ffreestanding -nostdlib -msimd128 -mbulk-memory \
 *     -Wl,--no-entry -Wl,--strip-all -I plugins/sdk/c -o my.wasm my.c
 *
 * Why it looks like this: the host runs every module with
 * WithCloseOnContextDone, which makes each loop iteration exit to Go for a
 * termination check (~50-100 ns). A byte-at-a-time JSON scanner therefore
 * costs ~50 ns per input byte. This reader scans strings 16 bytes per
 * iteration with wasm SIMD, compares keys in one vector compare and parses
 * integers with fully unrolled code, so a decision costs loop iterations
 * per JSON token, not per byte.
 *
 * The input buffer is followed by 64 zero bytes, so every 16-byte load stays
 * inside memory and a NUL always stops a scan.
 */
#ifndef LEASE_STRATEGY_H
#define LEASE_STRATEGY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <wasm_simd128.h>

#define LS_ABI_VERSION 1
/* LS_ABI_MINOR is the ABI revision this header knows: 1 adds the input's
 * "settings" (ls_settings) and "abiMinor". A module that needs settings
 * declares "abiMinor":1 in its info, and hosts before revision 1 refuse it.
 * 2 adds a candidate's "drained" (read it as any other member). */
#define LS_ABI_MINOR 2
#define LS_PAD 64
/* Header functions: unused ones are fine and must not warn. */
#define LS_API static __attribute__((unused))

#define LS_IMPORT(n) __attribute__((import_module("lease_strategy"), import_name(n)))
#define LS_EXPORT(n) __attribute__((export_name(n)))

LS_IMPORT("read_input") int32_t ls_read_input(void *buf, int32_t limit);
LS_IMPORT("write_output") void ls_write_output(const void *buf, int32_t len);
LS_IMPORT("log") void ls_log(int32_t level, const void *buf, int32_t len);
LS_IMPORT("log_enabled") int32_t ls_log_enabled(int32_t level);

enum { LS_LOG_DEBUG = -4, LS_LOG_INFO = 0, LS_LOG_WARN = 4, LS_LOG_ERROR = 8 };

/* ---- memory: a bump allocator over memory.grow. Instances live for one
 * decision, so nothing is ever freed. */

extern unsigned char __heap_base;
static uintptr_t ls_brk_;

LS_API void *ls_alloc(size_t n) {
	if (!ls_brk_) ls_brk_ = (uintptr_t)&__heap_base;
	uintptr_t p = (ls_brk_ + 15) & ~(uintptr_t)15;
	uintptr_t end = p + n;
	uintptr_t have = (uintptr_t)__builtin_wasm_memory_size(0) * 65536u;
	if (end < p) return 0;
	if (end > have) {
		size_t pages = (end - have + 65535u) / 65536u;
		if (__builtin_wasm_memory_grow(0, pages) == (size_t)-1) return 0;
	}
	ls_brk_ = end;
	return (void *)p;
}

/* ls_reserve grows memory once so that the next n bytes of allocations
 * need no memory.grow: each grow is an exit to the host that copies the
 * whole memory. */
LS_API bool ls_reserve(size_t n) {
	void *p = ls_alloc(n);
	if (!p) return false;
	ls_brk_ = (uintptr_t)p; /* give it back to the bump allocator */
	return true;
}

/* ls_input reads the whole Input JSON into a fresh, zero-padded buffer,
 * after reserving extra bytes per input byte for what the strategy
 * builds from it (extra_per_byte = 2 suits a parsed candidate list). */
LS_API const uint8_t *ls_input_reserve(uint32_t *len, uint32_t extra_per_byte) {
	int32_t n = ls_read_input(0, 0);
	if (n < 0 || !ls_reserve((size_t)n * (1 + extra_per_byte) + LS_PAD + 4096)) return 0;
	uint8_t *b = ls_alloc((size_t)n + LS_PAD);
	if (!b) return 0;
	if (ls_read_input(b, n) != n) return 0;
	__builtin_memset(b + n, 0, LS_PAD);
	*len = (uint32_t)n;
	return b;
}

LS_API const uint8_t *ls_input(uint32_t *len) { return ls_input_reserve(len, 0); }

/* ---- output builder ---- */

typedef struct {
	uint8_t *b;
	uint32_t n, cap;
	bool err;
} ls_out;

LS_API void ls_out_init(ls_out *o, uint32_t cap) {
	o->b = ls_alloc(cap);
	o->n = 0;
	o->cap = o->b ? cap : 0;
	o->err = !o->b;
}

LS_API void ls_put(ls_out *o, const void *s, uint32_t n) {
	if (o->err || n > o->cap - o->n) {
		o->err = true;
		return;
	}
	__builtin_memcpy(o->b + o->n, s, n);
	o->n += n;
}

#define ls_puts(o, lit) ls_put((o), (lit), sizeof(lit) - 1)

LS_API void ls_flush(ls_out *o) { ls_write_output(o->b, (int32_t)o->n); }

/* ---- JSON reader ---- */

typedef struct {
	const uint8_t *p, *end;
	bool err;
	int depth;
} ls_json;

typedef struct {
	const uint8_t *s; /* raw bytes between the quotes, escapes kept */
	uint32_t n;
} ls_str;

LS_API inline bool ls_isws(uint8_t c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

LS_API inline void ls_ws(ls_json *j) {
	if (ls_isws(*j->p)) {
		do j->p++;
		while (ls_isws(*j->p));
	}
}

LS_API inline bool ls_fail(ls_json *j) {
	j->err = true;
	j->p = j->end; /* *end is NUL: every later step fails fast */
	return false;
}

/* ls_stops: bit i set when p[i] ends a fast string scan: '"', '\\' or a
 * control character (which includes the NUL padding). */
LS_API inline uint32_t ls_stops(const uint8_t *p) {
	v128_t v = wasm_v128_load(p);
	v128_t m = wasm_v128_or(wasm_v128_or(wasm_i8x16_eq(v, wasm_i8x16_splat('"')),
	                                     wasm_i8x16_eq(v, wasm_i8x16_splat('\\'))),
	                        wasm_u8x16_lt(v, wasm_i8x16_splat(0x20)));
	return (uint32_t)wasm_i8x16_bitmask(m);
}

LS_API inline bool ls_hex(uint8_t c) {
	return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f');
}

/* ls_string_slow continues a string scan from p (at a stop byte that is
 * not the closing quote, or at the start of a long string). */
__attribute__((noinline)) LS_API bool ls_string_slow(ls_json *j, const uint8_t *start, const uint8_t *p, ls_str *out) {
	for (;;) {
		uint32_t m = ls_stops(p);
		if (!m) {
			do {
				p += 16;
				m = ls_stops(p);
			} while (!m);
		}
		p += __builtin_ctz(m);
		if (*p == '"') break;
		if (*p != '\\' || p >= j->end) return ls_fail(j);
		p++; /* escape */
		if (*p == 'u') {
			if (!ls_hex(p[1]) || !ls_hex(p[2]) || !ls_hex(p[3]) || !ls_hex(p[4])) return ls_fail(j);
			p += 5;
		} else if (*p == '"' || *p == '\\' || *p == '/' || *p == 'b' || *p == 'f' || *p == 'n' ||
		           *p == 'r' || *p == 't') {
			p++;
		} else {
			return ls_fail(j);
		}
	}
	if (p >= j->end) return ls_fail(j);
	out->s = start;
	out->n = (uint32_t)(p - start);
	j->p = p + 1;
	return true;
}

/* ls_string reads a string value; out gets its raw (still escaped) bytes.
 * Strings of up to 63 plain bytes (keys, versions, names, UIDs) take no
 * loop at all. */
LS_API inline bool ls_string(ls_json *j, ls_str *out) {
	ls_ws(j);
	const uint8_t *p = j->p;
	if (*p != '"') return ls_fail(j);
	const uint8_t *start = ++p;
	uint32_t m = ls_stops(p);
	if (!m) {
		m = ls_stops(p + 16) << 16;
		if (!m) {
			p += 32;
			m = ls_stops(p);
			if (!m) {
				m = ls_stops(p + 16) << 16;
				if (!m) return ls_string_slow(j, start, p + 32, out);
			}
		}
	}
	p += __builtin_ctz(m);
	if (*p != '"') return ls_string_slow(j, start, p, out);
	if (p >= j->end) return ls_fail(j);
	out->s = start;
	out->n = (uint32_t)(p - start);
	j->p = p + 1;
	return true;
}

LS_API inline bool ls_digit(uint8_t c) { return (uint8_t)(c - '0') <= 9; }

/* ls_u64 reads a non-negative integer (no fraction or exponent). */
LS_API bool ls_u64(ls_json *j, uint64_t *out) {
	ls_ws(j);
	const uint8_t *p = j->p;
	if (!ls_digit(p[0]) || (p[0] == '0' && ls_digit(p[1]))) return ls_fail(j);
	uint64_t v = 0;
	int i = 0;
	bool ovf = false;
	/* 19 digits always fit in 64 bits; only the 20th can overflow. */
#pragma clang loop unroll(full)
	for (int k = 0; k < 20; k++) {
		if (!ls_digit(p[k])) break;
		uint64_t d = (uint64_t)(p[k] - '0');
		if (k == 19) ovf = v > 1844674407370955161u || (v == 1844674407370955161u && d > 5);
		v = v * 10 + d;
		i = k + 1;
	}
	p += i;
	if (ovf || ls_digit(*p) || *p == '.' || *p == 'e' || *p == 'E') return ls_fail(j);
	j->p = p;
	*out = v;
	return true;
}

LS_API bool ls_i64(ls_json *j, int64_t *out) {
	ls_ws(j);
	bool neg = *j->p == '-';
	if (neg) j->p++;
	uint64_t u;
	if (!ls_u64(j, &u) || u > (uint64_t)INT64_MAX + neg) return ls_fail(j);
	*out = neg ? (int64_t)(0 - u) : (int64_t)u;
	return true;
}

LS_API inline uint32_t ls_load32(const uint8_t *p) {
	uint32_t v;
	__builtin_memcpy(&v, p, 4); /* one unaligned i32.load, no loop */
	return v;
}

#define LS_LIT32(a, b, c, d) ((uint32_t)(a) | (uint32_t)(b) << 8 | (uint32_t)(c) << 16 | (uint32_t)(d) << 24)

LS_API bool ls_bool(ls_json *j, bool *out) {
	ls_ws(j);
	uint32_t w = ls_load32(j->p);
	if (w == LS_LIT32('t', 'r', 'u', 'e')) {
		j->p += 4;
		*out = true;
		return true;
	}
	if (w == LS_LIT32('f', 'a', 'l', 's') && j->p[4] == 'e') {
		j->p += 5;
		*out = false;
		return true;
	}
	return ls_fail(j);
}

LS_API bool ls_null(ls_json *j) {
	ls_ws(j);
	if (ls_load32(j->p) != LS_LIT32('n', 'u', 'l', 'l')) return ls_fail(j);
	j->p += 4;
	return true;
}

LS_API inline bool ls_peek(ls_json *j, uint8_t c) {
	ls_ws(j);
	return *j->p == c;
}

/* Objects: if (ls_obj_open(j)) do { ls_key(j, &k); ...value... } while (ls_obj_next(j));
 * Arrays:  if (ls_arr_open(j)) do { ...value... } while (ls_arr_next(j));
 * or LS_OBJECT/LS_ARRAY below, which unroll the loop eight times: each
 * loop iteration costs a termination check in the host, each key does not. */
LS_API bool ls_open(ls_json *j, uint8_t open, uint8_t close) {
	ls_ws(j);
	if (*j->p != open) return ls_fail(j);
	j->p++;
	if (ls_peek(j, close)) {
		j->p++;
		return false;
	}
	return true;
}

LS_API bool ls_next(ls_json *j, uint8_t close) {
	ls_ws(j);
	if (*j->p == ',') {
		j->p++;
		return true;
	}
	if (*j->p == close) {
		j->p++;
		return false;
	}
	return ls_fail(j);
}

#define ls_obj_open(j) ls_open((j), '{', '}')
#define ls_obj_next(j) ls_next((j), '}')
#define ls_arr_open(j) ls_open((j), '[', ']')
#define ls_arr_next(j) ls_next((j), ']')

/* Loops over members/elements, unrolled eight times (a candidate has
 * about ten keys, a version five). The body must not use `continue`;
 * `break` ends the object early (after an error). */
#define LS_STEP_(j, close, ...) \
	{ __VA_ARGS__ }          \
	if (!ls_next((j), (close))) break;
#define LS_UNROLLED_(j, close, ...)                                                            \
	for (;;) {                                                                             \
		LS_STEP_(j, close, __VA_ARGS__) LS_STEP_(j, close, __VA_ARGS__)              \
		LS_STEP_(j, close, __VA_ARGS__) LS_STEP_(j, close, __VA_ARGS__)              \
		LS_STEP_(j, close, __VA_ARGS__) LS_STEP_(j, close, __VA_ARGS__)              \
		LS_STEP_(j, close, __VA_ARGS__) LS_STEP_(j, close, __VA_ARGS__)              \
	}

/* LS_OBJECT(j, k, if (LS_KEYIS(&k, name)) ...; else ls_skip(j);) */
#define LS_OBJECT(j, k, ...)                                                  \
	if (ls_obj_open(j))                                                   \
	LS_UNROLLED_((j), '}', ls_key_t k; if (!ls_key((j), &k)) break; __VA_ARGS__)

/* LS_ARRAY(j, ...): the body parses one element. */
#define LS_ARRAY(j, ...) \
	if (ls_arr_open(j)) LS_UNROLLED_((j), ']', __VA_ARGS__)

/* A key, kept as one zero-padded vector so that comparing it with a
 * literal is a single compare instead of a byte loop. */
typedef struct {
	v128_t v;
	uint32_t n; /* > 16 never matches LS_KEYIS */
	const uint8_t *s; /* raw key, for ls_key_is_long */
} ls_key_t;

LS_API bool ls_key(ls_json *j, ls_key_t *k) {
	ls_str s;
	if (!ls_string(j, &s)) return false;
	ls_ws(j);
	if (*j->p != ':') return ls_fail(j);
	j->p++;
	k->n = s.n;
	k->s = s.s;
	v128_t idx = wasm_i8x16_make(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
	k->v = wasm_v128_and(wasm_v128_load(s.s), wasm_u8x16_lt(idx, wasm_i8x16_splat((int8_t)(s.n > 16 ? 16 : s.n))));
	return true;
}

LS_API inline bool ls_keyeq_(const ls_key_t *k, const uint8_t lit[16], uint32_t n) {
	return k->n == n && !wasm_v128_any_true(wasm_v128_xor(k->v, wasm_v128_load(lit)));
}

/* ls_key_is_long compares a key with a C string of any length, byte by
 * byte (a loop: use LS_KEYIS for keys of up to 16 characters). */
LS_API bool ls_key_is_long(const ls_key_t *k, const char *lit) {
	uint32_t i = 0;
	for (; lit[i]; i++)
		if (i >= k->n || k->s[i] != (uint8_t)lit[i]) return false;
	return i == k->n;
}

/* LS_KEYIS(&key, name): is key the JSON key "name" (at most 16 chars; a
 * longer one does not compile)? */
#define LS_KEYIS(k, ident) ls_keyeq_((k), (const uint8_t[16]){#ident}, sizeof(#ident) - 1)

/* ls_skip skips any value. */
LS_API bool ls_skip(ls_json *j) {
	ls_ws(j);
	uint8_t c = *j->p;
	if (c == '"') {
		ls_str s;
		return ls_string(j, &s);
	}
	if (c == '{' || c == '[') {
		if (++j->depth > 64) return ls_fail(j);
		if (c == '{') {
			if (ls_obj_open(j)) do {
					ls_key_t k;
					if (!ls_key(j, &k) || !ls_skip(j)) return false;
				} while (ls_obj_next(j));
		} else {
			if (ls_arr_open(j)) do {
					if (!ls_skip(j)) return false;
				} while (ls_arr_next(j));
		}
		j->depth--;
		return !j->err;
	}
	if (c == 't' || c == 'f') {
		bool b;
		return ls_bool(j, &b);
	}
	if (c == 'n') return ls_null(j);
	if (c == '-' || ls_digit(c)) {
		/* Integers (the common case) without a byte loop; numbers with a
		 * fraction, an exponent or more than 20 digits take the slow path. */
		const uint8_t *p = j->p + (c == '-');
		int i = 0;
#pragma clang loop unroll(full)
		for (int k = 0; k < 20; k++) {
			if (!ls_digit(p[k])) break;
			i = k + 1;
		}
		if (i == 0) return ls_fail(j);
		p += i;
		if (ls_digit(*p) || *p == '.' || *p == 'e' || *p == 'E') {
			while (ls_digit(*p) || *p == '.' || *p == 'e' || *p == 'E' || *p == '+' || *p == '-') p++;
		}
		j->p = p;
		return true;
	}
	return ls_fail(j);
}

/* ls_settings finds the strategy's settings document (NAME.json beside
 * NAME.wasm, abi.Input.settings) in the input [in, in+len) and sets *out
 * to a reader positioned at it (an object: LS_OBJECT(out, k, ...)).
 * It returns false when the module has no settings or the input does not
 * parse. The input must be ls_input's (padded) buffer. */
LS_API bool ls_settings(const uint8_t *in, uint32_t len, ls_json *out) {
	ls_json j = {in, in + len, false, 0};
	if (ls_obj_open(&j)) do {
			ls_key_t k;
			if (!ls_key(&j, &k)) return false;
			if (LS_KEYIS(&k, settings)) {
				ls_ws(&j);
				*out = j;
				return *j.p == '{';
			}
			if (!ls_skip(&j)) return false;
		} while (ls_obj_next(&j));
	return false;
}

/* ls_end checks that only whitespace follows the top-level value. */
LS_API bool ls_end(ls_json *j) {
	ls_ws(j);
	return j->p == j->end && !j->err;
}

/* ls_bytes_cmp compares two byte strings, 16 bytes per step; both may be
 * read up to 16 bytes past their end (the input padding makes that safe). */
LS_API int ls_bytes_cmp(const uint8_t *a, uint32_t an, const uint8_t *b, uint32_t bn) {
	uint32_t n = an < bn ? an : bn, i = 0;
	for (;;) {
		uint32_t diff = (uint32_t)wasm_i8x16_bitmask(wasm_v128_not(wasm_i8x16_eq(wasm_v128_load(a + i), wasm_v128_load(b + i))));
		if (diff) {
			uint32_t at = i + __builtin_ctz(diff);
			if (at >= n) break;
			return a[at] < b[at] ? -1 : 1;
		}
		i += 16;
		if (i >= n) break;
	}
	return an < bn ? -1 : an > bn ? 1 : 0;
}

#endif
