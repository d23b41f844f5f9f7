// Tiny DOM helpers. Data is only ever set as text or attribute values,
// never parsed as HTML, so a hostile holder identity cannot inject markup.

// h creates an element: props are attributes ("class", "aria-label",
// "data-x", ...), "text" for textContent, and on<event> for listeners.
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (v == null || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k === 'text') el.textContent = v;
    else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c == null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : String(c));
  }
}

// setText changes text only when it differs, so the 1 Hz ticker does not
// churn the DOM (or screen readers) with identical values.
export function setText(el, text) {
  if (el.textContent !== text) el.textContent = text;
}

// copyButton copies text to the clipboard and says so in words.
export function copyButton(getText, label = 'Copy') {
  const b = h('button', { type: 'button', class: 'ghost small copy', 'aria-label': label }, 'Copy');
  b.addEventListener('click', async () => {
    const text = getText();
    let ok = false;
    try {
      await navigator.clipboard.writeText(text);
      ok = true;
    } catch {
      // navigator.clipboard needs a secure context; plain http on a
      // device's address is not one, so fall back to a selection copy.
      const ta = h('textarea', { class: 'offscreen', 'aria-hidden': 'true' });
      ta.value = text;
      document.body.append(ta);
      ta.select();
      ok = document.execCommand('copy');
      ta.remove();
    }
    b.textContent = ok ? 'Copied' : 'Copy failed';
    setTimeout(() => { b.textContent = 'Copy'; }, 1500);
  });
  return b;
}

// svg creates an SVG element: props are attributes, children are elements
// or text (a <title> child is the browser's tooltip).
export function svg(tag, props, ...children) {
  const el = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (v != null && v !== false) el.setAttribute(k, String(v));
  }
  append(el, children);
  return el;
}
