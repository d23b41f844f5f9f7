// lease_strategy.ts: a single-file AssemblyScript SDK for leasehold election
// strategies (ABI v1, see docs/plugins.md). Copy it beside your strategy and
// import it; it needs nothing but the `assemblyscript` compiler (no JSON
// package, no WASI: the module imports only the lease_strategy host
// functions it uses).
//
// A strategy's entry file exports the three ABI functions:
//
//   import { ABI_VERSION, Info, Input, Decision, decideWith, writeInfo } from "./lease_strategy";
//   export function lease_strategy_abi_version(): i32 { return ABI_VERSION; }
//   export function lease_strategy_info(): i32 { return writeInfo(new Info("example.com/mine", "1.0.0")); }
//   export function lease_strategy_decide(): i32 { return decideWith(decide); }
//   function decide(input: Input): Decision | null { ... }
//
// Build with the stub runtime (a bump allocator: the host throws each
// instance away after one decision, so nothing needs freeing) and without
// the env.abort import (which the sandbox refuses):
//
//   npx asc index.ts -o mine.wasm -O3 --runtime stub --use abort= --noAssert
//
// Strings are decoded from the input's UTF-8 into AssemblyScript strings and
// encoded back on output, so candidate names round-trip exactly.

// ---- the host imports (module "lease_strategy") ----

@external("lease_strategy", "read_input")
declare function ls_read_input(buf: usize, limit: i32): i32;
@external("lease_strategy", "write_output")
declare function ls_write_output(buf: usize, len: i32): void;
@external("lease_strategy", "log")
declare function ls_log(level: i32, buf: usize, len: i32): void;
@external("lease_strategy", "log_enabled")
declare function ls_log_enabled(level: i32): i32;

/** The lease-strategy ABI major version this SDK speaks. */
export const ABI_VERSION: i32 = 1;

/** Log levels of the log import: log/slog's numeric levels. */
export const LOG_DEBUG: i32 = -4;
export const LOG_INFO: i32 = 0;
export const LOG_WARN: i32 = 4;
export const LOG_ERROR: i32 = 8;

/** Decision actions (the Decision's `action`). */
export const ACTION_KEEP = "keep";
export const ACTION_PREFER = "prefer";
export const ACTION_ABSTAIN = "abstain";

// ---- the documents ----

/** A version as the host parsed it (semver, ParseTolerant rules). */
export class Version {
  raw: string = "";
  valid: bool = false;
  major: u64 = 0;
  minor: u64 = 0;
  patch: u64 = 0;
  prerelease: string[] = [];
}

/** The lease under decision; times are Unix microseconds (0 = unset). */
export class LeaseState {
  namespace: string = "";
  name: string = "";
  exists: bool = false;
  holder: string = "";
  preferredHolder: string = "";
  strategy: string = "";
  acquireTimeUs: i64 = 0;
  renewTimeUs: i64 = 0;
  leaseDurationSeconds: i32 = 0;
  transitions: i32 = 0;
  expired: bool = false;
  holderIsCandidate: bool = false;
  holderSinceUs: i64 = 0;
}

/** One LeaseCandidate; only acked candidates can be granted a lease. */
export class Candidate {
  name: string = "";
  uid: string = "";
  creationTimeUs: i64 = 0;
  binaryVersion: Version = new Version();
  emulationVersion: Version = new Version();
  strategy: string = "";
  renewTimeUs: i64 = 0;
  pingTimeUs: i64 = 0;
  acked: bool = false;
  labels: Map<string, string> = new Map<string, string>();
  /** An operator drained this identity (since ABI 1.2): the host never
   * grants it a lease, whatever the ranking; rank around it. */
  drained: bool = false;
}

/** One earlier decision on the same lease, newest last. */
export class HistoryEntry {
  seq: i64 = 0;
  timeUs: i64 = 0;
  chosen: string = "";
  holder: string = "";
  reason: string = "";
}

/** The deterministic snapshot a strategy decides on. */
export class Input {
  abiVersion: i32 = 0;
  strategy: string = "";
  nowUs: i64 = 0;
  decisionSeq: i64 = 0;
  seed: u64 = 0;
  reason: string = "";
  lease: LeaseState = new LeaseState();
  candidates: Candidate[] = [];
  history: HistoryEntry[] = [];
  /** The ABI minor revision of the host (1: settings exist). */
  abiMinor: i32 = 0;
  /** The strategy's settings (NAME.json beside NAME.wasm) as JSON text,
   * one object, or "" when it has none. A module that reads them declares
   * abiMinor 1 in its Info, so that older hosts refuse it. */
  settings: string = "";
}

/** A strategy's answer. */
export class Decision {
  /** Candidate names, best first; unlisted candidates are ineligible. */
  ranking: string[] = [];
  action: string = ACTION_KEEP;
  /** Allows asking a live holder to step down (preferredHolder). */
  preempt: bool = false;
  /** One human line, recorded with the decision. */
  reason: string = "";

  toJSON(): string {
    let s = '{"ranking":[';
    for (let i = 0; i < this.ranking.length; i++) {
      if (i > 0) s += ",";
      s += quote(this.ranking[i]);
    }
    return s + '],"action":' + quote(this.action) + ',"preempt":' + (this.preempt ? "true" : "false") +
      ',"reason":' + quote(this.reason) + "}";
  }
}

/** What a module says about itself: name is what candidates declare. */
export class Info {
  /** The ABI minor revision the module needs (1 to read settings). */
  abiMinor: i32 = 0;

  constructor(public name: string, public version: string, public description: string = "") {}

  toJSON(): string {
    let s = '{"name":' + quote(this.name) + ',"version":' + quote(this.version);
    if (this.description.length > 0) s += ',"description":' + quote(this.description);
    if (this.abiMinor > 0) s += ',"abiMinor":' + this.abiMinor.toString();
    return s + "}";
  }
}

// ---- the exports' bodies ----

let errorMessage = "";

/**
 * settingString returns the string member key of the strategy's settings
 * object (Input.settings), or "" when the module has no settings or the
 * member is missing or not a string.
 */
export function settingString(input: Input, key: string): string {
  if (input.settings.length == 0) return "";
  const buf = String.UTF8.encode(input.settings, true); // the Reader stops at a zero
  const p = changetype<usize>(buf);
  const r = new Reader(p, p + <usize>buf.byteLength - 1);
  r.expect(0x7b);
  for (let first = true; r.more(0x7d, first); first = false) {
    const k = r.key();
    r.ws();
    if (k == key && r.peek() == 0x22) return r.str();
    r.skip();
  }
  return "";
}

/** fail makes decide report a strategy error: return fail("why") from it. */
export function fail(message: string): Decision | null {
  errorMessage = message;
  return null;
}

/** writeInfo is lease_strategy_info's body. */
export function writeInfo(info: Info): i32 {
  output(info.toJSON());
  return 0;
}

/**
 * decideWith is lease_strategy_decide's body: it reads and decodes the
 * Input, runs decide and writes its Decision (returns 0), or writes the
 * error and returns 1 when the input does not decode or decide returns null.
 */
export function decideWith(decide: (input: Input) => Decision | null): i32 {
  const input = readInput();
  if (input == null) {
    output("lease_strategy.ts: " + errorMessage);
    return 1;
  }
  const d = decide(input);
  if (d == null) {
    output(errorMessage.length > 0 ? errorMessage : "strategy returned no decision");
    return 1;
  }
  output(d.toJSON());
  return 0;
}

/** log sends one line to the server log, if the host logs that level. */
export function log(level: i32, message: string): void {
  if (ls_log_enabled(level) == 0) return;
  const b = String.UTF8.encode(message);
  ls_log(level, changetype<usize>(b), b.byteLength);
}

function output(s: string): void {
  const b = String.UTF8.encode(s);
  ls_write_output(changetype<usize>(b), b.byteLength);
}

/** readInput reads and decodes the Input; null (and errorMessage) if malformed. */
export function readInput(): Input | null {
  const n = ls_read_input(0, 0);
  // One extra zero byte: the reader's look-ahead stops on it.
  const buf = new ArrayBuffer(n + 1);
  const p = changetype<usize>(buf);
  if (ls_read_input(p, n) != n) {
    errorMessage = "input changed size";
    return null;
  }
  const r = new Reader(p, p + <usize>n);
  const input = r.input();
  r.ws();
  if (r.failed || r.p != r.end) {
    errorMessage = "malformed input JSON at byte " + (r.p - p).toString();
    return null;
  }
  return input;
}

// ---- versions ----

/**
 * compareVersion orders two valid versions by semver precedence: -1, 0 or
 * +1. A pre-release sorts before its release; numeric identifiers compare
 * as numbers and before alphanumeric ones (as the host's abi.CompareVersion).
 */
export function compareVersion(a: Version, b: Version): i32 {
  if (a.major != b.major) return a.major < b.major ? -1 : 1;
  if (a.minor != b.minor) return a.minor < b.minor ? -1 : 1;
  if (a.patch != b.patch) return a.patch < b.patch ? -1 : 1;
  const na = a.prerelease.length, nb = b.prerelease.length;
  if (na == 0 && nb == 0) return 0;
  if (na == 0) return 1;
  if (nb == 0) return -1;
  for (let i = 0; i < na && i < nb; i++) {
    const c = compareIdent(a.prerelease[i], b.prerelease[i]);
    if (c != 0) return c;
  }
  return na == nb ? 0 : na < nb ? -1 : 1;
}

function compareIdent(a: string, b: string): i32 {
  const an = isNumeric(a), bn = isNumeric(b);
  if (an && bn) {
    // No leading zeros in numeric identifiers: the longer is larger.
    if (a.length != b.length) return a.length < b.length ? -1 : 1;
  } else if (an) {
    return -1;
  } else if (bn) {
    return 1;
  }
  return a == b ? 0 : a < b ? -1 : 1;
}

function isNumeric(s: string): bool {
  if (s.length == 0) return false;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x30 || c > 0x39) return false;
  }
  return true;
}

// ---- JSON ----

/** quote encodes s as a JSON string. */
export function quote(s: string): string {
  let out = '"';
  let from = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0x20 && c != 0x22 && c != 0x5c) continue;
    out += s.substring(from, i);
    from = i + 1;
    if (c == 0x22) out += '\\"';
    else if (c == 0x5c) out += "\\\\";
    else if (c == 0x0a) out += "\\n";
    else if (c == 0x0d) out += "\\r";
    else if (c == 0x09) out += "\\t";
    else out += "\\u00" + (c < 0x10 ? "0" : "1") + "0123456789abcdef".charAt(c & 15);
  }
  return out + s.substring(from) + '"';
}

/**
 * Reader decodes the Input. Unknown keys are skipped (later minor ABI
 * versions may add fields); a malformed document sets failed and moves to
 * the end, so every later step stops at once.
 */
class Reader {
  failed: bool = false;
  constructor(public p: usize, public end: usize) {}

  fail(): void {
    this.failed = true;
    this.p = this.end;
  }

  @inline peek(): u8 {
    return load<u8>(this.p); // the byte at end is a zero
  }

  ws(): void {
    let c = this.peek();
    while (c == 0x20 || c == 0x0a || c == 0x0d || c == 0x09) {
      this.p++;
      c = this.peek();
    }
  }

  /** eat consumes c (after spaces) and reports whether it was there. */
  eat(c: u8): bool {
    this.ws();
    if (this.peek() != c) return false;
    this.p++;
    return true;
  }

  expect(c: u8): void {
    if (!this.eat(c)) this.fail();
  }

  /** more is the loop condition of an object or array: after the first
   * member, a ',' continues and the closing byte ends it. */
  more(close: u8, first: bool): bool {
    if (this.failed) return false;
    if (this.eat(close)) return false;
    if (!first) {
      this.expect(0x2c); // ','
      if (this.failed) return false;
    }
    return true;
  }

  key(): string {
    const k = this.str();
    this.expect(0x3a); // ':'
    return k;
  }

  literal(word: string): void {
    this.ws();
    for (let i = 0; i < word.length; i++) {
      if (this.p >= this.end || load<u8>(this.p) != <u8>word.charCodeAt(i)) {
        this.fail();
        return;
      }
      this.p++;
    }
  }

  isNull(): bool {
    this.ws();
    if (this.peek() != 0x6e) return false; // 'n'
    this.literal("null");
    return true;
  }

  bool(): bool {
    this.ws();
    if (this.peek() == 0x74) {
      this.literal("true");
      return true;
    }
    this.literal("false");
    return false;
  }

  str(): string {
    this.expect(0x22);
    let out = "";
    let from = this.p;
    while (this.p < this.end) {
      const c = load<u8>(this.p);
      if (c == 0x22) {
        out += String.UTF8.decodeUnsafe(from, this.p - from);
        this.p++;
        return out;
      }
      if (c < 0x20) break;
      if (c != 0x5c) {
        this.p++;
        continue;
      }
      out += String.UTF8.decodeUnsafe(from, this.p - from);
      const e = load<u8>(this.p + 1);
      this.p += 2;
      if (e == 0x75) { // \uXXXX: a UTF-16 code unit, as AssemblyScript strings are
        let u: i32 = 0;
        for (let i = 0; i < 4; i++) {
          const h = this.hex(load<u8>(this.p + i));
          if (h < 0) {
            this.fail();
            return "";
          }
          u = u * 16 + h;
        }
        this.p += 4;
        out += String.fromCharCode(u);
      } else if (e == 0x22 || e == 0x5c || e == 0x2f) out += String.fromCharCode(e);
      else if (e == 0x62) out += "\b";
      else if (e == 0x66) out += "\f";
      else if (e == 0x6e) out += "\n";
      else if (e == 0x72) out += "\r";
      else if (e == 0x74) out += "\t";
      else break;
      from = this.p;
    }
    this.fail();
    return "";
  }

  hex(c: u8): i32 {
    if (c >= 0x30 && c <= 0x39) return c - 0x30;
    if (c >= 0x61 && c <= 0x66) return c - 0x61 + 10;
    if (c >= 0x41 && c <= 0x46) return c - 0x41 + 10;
    return -1;
  }

  u64(): u64 {
    this.ws();
    let v: u64 = 0;
    const start = this.p;
    while (this.p < this.end) {
      const d = <u64>load<u8>(this.p) - 0x30;
      if (d > 9) break;
      if (v > (U64.MAX_VALUE - d) / 10) {
        this.fail();
        return 0;
      }
      v = v * 10 + d;
      this.p++;
    }
    const c = this.peek();
    if (this.p == start || c == 0x2e || c == 0x65 || c == 0x45) this.fail();
    return v;
  }

  i64(): i64 {
    this.ws();
    const neg = this.peek() == 0x2d;
    if (neg) this.p++;
    const u = this.u64();
    if (u > <u64>I64.MAX_VALUE + (neg ? 1 : 0)) {
      this.fail();
      return 0;
    }
    return neg ? -(<i64>u) : <i64>u;
  }

  /** skip passes over any value. */
  skip(): void {
    this.ws();
    const c = this.peek();
    if (c == 0x7b) { // {
      this.p++;
      for (let first = true; this.more(0x7d, first); first = false) {
        this.key();
        this.skip();
      }
    } else if (c == 0x5b) { // [
      this.p++;
      for (let first = true; this.more(0x5d, first); first = false) this.skip();
    } else if (c == 0x22) this.str();
    else if (c == 0x74) this.literal("true");
    else if (c == 0x66) this.literal("false");
    else if (c == 0x6e) this.literal("null");
    else if (c == 0x2d || (c >= 0x30 && c <= 0x39)) {
      const start = this.p;
      let d = this.peek();
      while (d == 0x2d || d == 0x2b || d == 0x2e || d == 0x65 || d == 0x45 || (d >= 0x30 && d <= 0x39)) {
        this.p++;
        d = this.peek();
      }
      if (this.p == start) this.fail();
    } else this.fail();
  }

  strings(): string[] {
    const out: string[] = [];
    if (this.isNull()) return out;
    this.expect(0x5b);
    for (let first = true; this.more(0x5d, first); first = false) out.push(this.str());
    return out;
  }

  version(): Version {
    const v = new Version();
    this.expect(0x7b);
    for (let first = true; this.more(0x7d, first); first = false) {
      const k = this.key();
      if (k == "raw") v.raw = this.str();
      else if (k == "valid") v.valid = this.bool();
      else if (k == "major") v.major = this.u64();
      else if (k == "minor") v.minor = this.u64();
      else if (k == "patch") v.patch = this.u64();
      else if (k == "prerelease") v.prerelease = this.strings();
      else this.skip();
    }
    return v;
  }

  lease(): LeaseState {
    const l = new LeaseState();
    this.expect(0x7b);
    for (let first = true; this.more(0x7d, first); first = false) {
      const k = this.key();
      if (k == "namespace") l.namespace = this.str();
      else if (k == "name") l.name = this.str();
      else if (k == "exists") l.exists = this.bool();
      else if (k == "holder") l.holder = this.str();
      else if (k == "preferredHolder") l.preferredHolder = this.str();
      else if (k == "strategy") l.strategy = this.str();
      else if (k == "acquireTimeUs") l.acquireTimeUs = this.i64();
      else if (k == "renewTimeUs") l.renewTimeUs = this.i64();
      else if (k == "leaseDurationSeconds") l.leaseDurationSeconds = <i32>this.i64();
      else if (k == "transitions") l.transitions = <i32>this.i64();
      else if (k == "expired") l.expired = this.bool();
      else if (k == "holderIsCandidate") l.holderIsCandidate = this.bool();
      else if (k == "holderSinceUs") l.holderSinceUs = this.i64();
      else this.skip();
    }
    return l;
  }

  candidate(): Candidate {
    const c = new Candidate();
    this.expect(0x7b);
    for (let first = true; this.more(0x7d, first); first = false) {
      const k = this.key();
      if (k == "name") c.name = this.str();
      else if (k == "uid") c.uid = this.str();
      else if (k == "creationTimeUs") c.creationTimeUs = this.i64();
      else if (k == "binaryVersion") c.binaryVersion = this.version();
      else if (k == "emulationVersion") c.emulationVersion = this.version();
      else if (k == "strategy") c.strategy = this.str();
      else if (k == "renewTimeUs") c.renewTimeUs = this.i64();
      else if (k == "pingTimeUs") c.pingTimeUs = this.i64();
      else if (k == "acked") c.acked = this.bool();
      else if (k == "drained") c.drained = this.bool();
      else if (k == "labels") {
        if (this.isNull()) continue;
        this.expect(0x7b);
        for (let f = true; this.more(0x7d, f); f = false) {
          const name = this.key();
          c.labels.set(name, this.str());
        }
      } else this.skip();
    }
    return c;
  }

  historyEntry(): HistoryEntry {
    const h = new HistoryEntry();
    this.expect(0x7b);
    for (let first = true; this.more(0x7d, first); first = false) {
      const k = this.key();
      if (k == "seq") h.seq = this.i64();
      else if (k == "timeUs") h.timeUs = this.i64();
      else if (k == "chosen") h.chosen = this.str();
      else if (k == "holder") h.holder = this.str();
      else if (k == "reason") h.reason = this.str();
      else this.skip();
    }
    return h;
  }

  input(): Input {
    const in_ = new Input();
    this.expect(0x7b);
    for (let first = true; this.more(0x7d, first); first = false) {
      const k = this.key();
      if (k == "abiVersion") in_.abiVersion = <i32>this.i64();
      else if (k == "strategy") in_.strategy = this.str();
      else if (k == "nowUs") in_.nowUs = this.i64();
      else if (k == "decisionSeq") in_.decisionSeq = this.i64();
      else if (k == "seed") in_.seed = this.u64();
      else if (k == "reason") in_.reason = this.str();
      else if (k == "abiMinor") in_.abiMinor = <i32>this.i64();
      else if (k == "settings") {
        // Kept as text: its shape is the strategy's own.
        this.ws();
        const start = this.p;
        this.skip();
        if (!this.failed && load<u8>(start) == 0x7b) in_.settings = String.UTF8.decodeUnsafe(start, this.p - start);
      }
      else if (k == "lease") in_.lease = this.lease();
      else if (k == "candidates") {
        if (this.isNull()) continue;
        this.expect(0x5b);
        for (let f = true; this.more(0x5d, f); f = false) in_.candidates.push(this.candidate());
      } else if (k == "history") {
        if (this.isNull()) continue;
        this.expect(0x5b);
        for (let f = true; this.more(0x5d, f); f = false) in_.history.push(this.historyEntry());
      } else this.skip();
    }
    return in_;
  }
}
