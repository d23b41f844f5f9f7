// Formatting of times, durations and sizes for humans.

// parseTime parses RFC 3339 with any number of fractional digits
// (MicroTime has six) into epoch milliseconds, or null.
export function parseTime(s) {
  if (!s) return null;
  const t = Date.parse(String(s).replace(/(\.\d{3})\d+/, '$1'));
  return Number.isNaN(t) ? null : t;
}

// dur renders a duration compactly: 9s, 1m 05s, 2h 03m, 3d 4h.
export function dur(ms) {
  if (ms == null) return '—';
  let s = Math.floor(Math.abs(ms) / 1000);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60); s %= 60;
  if (m < 60) return `${m}m ${String(s).padStart(2, '0')}s`;
  const hr = Math.floor(m / 60);
  if (hr < 48) return `${hr}h ${String(m % 60).padStart(2, '0')}m`;
  return `${Math.floor(hr / 24)}d ${hr % 24}h`;
}

// ago renders the age of a past instant.
export function ago(t, now) {
  return t == null ? '—' : `${dur(now - t)} ago`;
}

// abs renders an instant as UTC, to the second.
export function abs(t) {
  return t == null ? '' : new Date(t).toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
}

// clock renders a local wall-clock time, for "stale since 12:03:04".
export function clock(t) {
  return new Date(t).toLocaleTimeString([], { hour12: false });
}

export function bytes(n) {
  if (n == null) return '—';
  const u = ['B', 'KiB', 'MiB', 'GiB'];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return `${i ? n.toFixed(1) : n} ${u[i]}`;
}

// ns renders Go time.Duration nanoseconds.
export function nanos(n) {
  if (!n) return '0';
  if (n < 1e6) return `${(n / 1e3).toFixed(0)} µs`;
  if (n < 1e9) return `${(n / 1e6).toFixed(1)} ms`;
  return `${(n / 1e9).toFixed(2)} s`;
}
