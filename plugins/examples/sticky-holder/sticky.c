/*
 * example.com/sticky-holder: an example election strategy in C, built with
 * the freestanding C SDK (plugins/sdk/c/lease_strategy.h).
 *
 * Leadership is sticky: a live holder that is still a candidate keeps the
 * lease and is never preempted. When the lease is free, expired or held by
 * someone who is not a candidate, the oldest candidate (creation time, then
 * name) is preferred. Fewer handovers than OldestEmulationVersion, at the
 * price of ignoring versions entirely.
 *
 * Build (one line, from this directory):
 *   clang --target=wasm32 -O2 -ffreestanding -nostdlib -msimd128 -mbulk-memory -Wl,--no-entry -Wl,--strip-all -I../../sdk/c -o sticky-holder.wasm sticky.c
 */
#include "lease_strategy.h"

typedef struct {
	ls_str name;
	int64_t created;
} cand;

static bool before(const cand *a, const cand *b) {
	if (a->created != b->created) return a->created < b->created;
	return ls_bytes_cmp(a->name.s, a->name.n, b->name.s, b->name.n) < 0;
}

typedef struct {
	ls_str holder;
	bool exists, expired, holder_is_candidate;
} lease;

static void parse_lease(ls_json *j, lease *l) {
	LS_OBJECT(j, k,
		if (ls_key_is_long(&k, "holderIsCandidate")) ls_bool(j, &l->holder_is_candidate);
		else if (LS_KEYIS(&k, holder)) ls_string(j, &l->holder);
		else if (LS_KEYIS(&k, exists)) ls_bool(j, &l->exists);
		else if (LS_KEYIS(&k, expired)) ls_bool(j, &l->expired);
		else ls_skip(j);
	)
}

static bool parse_candidate(ls_json *j, cand *c) {
	c->name.s = 0;
	c->created = 0;
	LS_OBJECT(j, k,
		if (LS_KEYIS(&k, name)) ls_string(j, &c->name);
		else if (LS_KEYIS(&k, creationTimeUs)) ls_i64(j, &c->created);
		else ls_skip(j);
	)
	return c->name.s != 0;
}

static int32_t fail(const char *msg, uint32_t n) {
	ls_write_output(msg, (int32_t)n);
	return 1;
}

LS_EXPORT("lease_strategy_abi_version") int32_t abi_version(void) { return LS_ABI_VERSION; }

LS_EXPORT("lease_strategy_info") int32_t info(void) {
	static const char doc[] = "{\"name\":\"example.com/sticky-holder\",\"version\":\"0.1.0\","
	                          "\"description\":\"Keep a live candidate holder; otherwise the oldest candidate.\"}";
	ls_write_output(doc, sizeof(doc) - 1);
	return 0;
}

LS_EXPORT("lease_strategy_decide") int32_t decide(void) {
	uint32_t len;
	const uint8_t *buf = ls_input_reserve(&len, 1);
	if (!buf) return fail("cannot read input", 17);
	ls_json j = {buf, buf + len, false, 0};

	uint32_t cap = len / 64 + 8, n = 0;
	cand *cs = ls_alloc(sizeof(cand) * cap);
	lease l = {{0, 0}, false, false, false};
	if (!cs) return fail("out of memory", 13);

	LS_OBJECT(&j, k,
		if (LS_KEYIS(&k, lease)) parse_lease(&j, &l);
		else if (LS_KEYIS(&k, candidates) && !ls_peek(&j, 'n')) {
			LS_ARRAY(&j,
				if (n == cap || !parse_candidate(&j, &cs[n++])) { j.err = true; break; }
			)
		} else ls_skip(&j);
	)
	if (!ls_end(&j)) return fail("invalid input", 13);

	/* Insertion sort: an example should be easy to read. */
	for (uint32_t i = 1; i < n; i++) {
		cand c = cs[i];
		uint32_t k = i;
		while (k > 0 && before(&c, &cs[k - 1])) {
			cs[k] = cs[k - 1];
			k--;
		}
		cs[k] = c;
	}

	ls_str holder = l.holder;
	bool sticky = l.exists && !l.expired && l.holder_is_candidate && holder.s;
	uint32_t room = 160;
	for (uint32_t i = 0; i < n; i++) room += cs[i].name.n + 3;
	ls_out o;
	ls_out_init(&o, room);
	ls_puts(&o, "{\"ranking\":[");
	bool first = true;
	if (sticky) { /* the holder first, then everyone else */
		ls_puts(&o, "\"");
		ls_put(&o, holder.s, holder.n);
		ls_puts(&o, "\"");
		first = false;
	}
	for (uint32_t i = 0; i < n; i++) {
		if (sticky && ls_bytes_cmp(cs[i].name.s, cs[i].name.n, holder.s, holder.n) == 0) continue;
		if (!first) ls_puts(&o, ",");
		first = false;
		ls_puts(&o, "\"");
		ls_put(&o, cs[i].name.s, cs[i].name.n);
		ls_puts(&o, "\"");
	}
	if (sticky) ls_puts(&o, "],\"action\":\"keep\",\"preempt\":false,\"reason\":\"the holder is still a candidate\"}");
	else if (n == 0) ls_puts(&o, "],\"action\":\"keep\",\"preempt\":false,\"reason\":\"no candidates\"}");
	else ls_puts(&o, "],\"action\":\"prefer\",\"preempt\":false,\"reason\":\"oldest candidate\"}");
	if (o.err) return fail("out of memory", 13);
	if (ls_log_enabled(LS_LOG_DEBUG)) ls_log(LS_LOG_DEBUG, "sticky-holder decided", 21);
	ls_flush(&o);
	return 0;
}
