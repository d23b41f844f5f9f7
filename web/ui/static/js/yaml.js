// toYAML renders JSON data as YAML the way kubectl prints it (block
// style, sequences not indented under their key, strings quoted when a
// YAML reader would take them for something else).

export function toYAML(v) {
  return block(v, '').join('\n') + '\n';
}

function block(v, ind) {
  if (Array.isArray(v)) {
    if (!v.length) return [`${ind}[]`];
    return v.flatMap((item) => {
      if (isScalar(item) || isEmpty(item)) return [`${ind}- ${scalar(item)}`];
      const lines = block(item, `${ind}  `);
      lines[0] = `${ind}- ${lines[0].trimStart()}`;
      return lines;
    });
  }
  if (v && typeof v === 'object') {
    const keys = Object.keys(v);
    if (!keys.length) return [`${ind}{}`];
    return keys.flatMap((k) => {
      const val = v[k];
      const key = `${ind}${str(k)}:`;
      if (isScalar(val) || isEmpty(val)) return [`${key} ${scalar(val)}`];
      return [key, ...block(val, Array.isArray(val) ? ind : `${ind}  `)];
    });
  }
  return [`${ind}${scalar(v)}`];
}

const isScalar = (v) => v === null || typeof v !== 'object';
const isEmpty = (v) => (Array.isArray(v) ? !v.length : !Object.keys(v).length);

function scalar(v) {
  if (v === null || v === undefined) return 'null';
  if (Array.isArray(v)) return '[]';
  if (typeof v === 'object') return '{}';
  if (typeof v === 'string') return str(v);
  return String(v);
}

// Plain strings must not look like numbers, booleans, null or timestamps
// and must not contain YAML indicators; anything else is double-quoted
// (JSON string syntax is valid YAML).
const PLAIN = /^[A-Za-z_/][A-Za-z0-9_./@-]*( [A-Za-z0-9_./@-]+)*$/;
const RESERVED = /^(true|false|yes|no|on|off|y|n|null|~)$/i;
function str(s) {
  return PLAIN.test(s) && !RESERVED.test(s) ? s : JSON.stringify(s);
}
