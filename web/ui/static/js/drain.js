// Drain: maintenance mode for an identity. The page drains and undrains
// through the server's drain endpoints with the page's token, as
// `leasehold drain` does; the server writes who drained it (the name the
// request was authenticated as) and records it in the decision history of
// every lease the identity stands for or holds: nothing the page asserts
// goes into a record.
//
// openDrainDialog is the entry point other parts of the page may use (the
// hand-over dialog offers "Drain instead" with it).

import { h, setText } from './dom.js';
import { api, getJSON } from './api.js';

const enc = encodeURIComponent;

// ANNOTATION drains a LeaseCandidate's identity, the kubectl way.
export const DRAIN_ANNOTATION = 'leasehold.dev/drain';

const drainPath = (ns, id) => `/leasehold/v1/namespaces/${enc(ns)}/drains/${enc(id)}?fieldManager=leasehold-ui`;

// drainsOf reads the drains of namespace ns: a Map from identity to its
// record ({by, time, via, forced}); null from a server that keeps none.
export async function drainsOf(ns) {
  const list = await getJSON(`/leasehold/v1/namespaces/${enc(ns)}/drains`);
  if (!list.available) return null;
  return new Map((list.items || []).map((d) => [d.identity, d]));
}

// drainIdentity drains ns/id ({force}: even the only live candidate of a
// lease). It resolves to {ok, status, record, message}: a refusal is
// status 409 with the server's message.
export async function drainIdentity(ns, id, { force = false } = {}) {
  const res = await api(drainPath(ns, id) + (force ? '&force=true' : ''), { method: 'PUT' });
  return outcome(res);
}

// undrainIdentity undrains ns/id, resolving as drainIdentity does.
export async function undrainIdentity(ns, id) {
  return outcome(await api(drainPath(ns, id), { method: 'DELETE' }));
}

async function outcome(res) {
  const body = await res.json().catch(() => null);
  return { ok: res.ok, status: res.status, record: res.ok ? body : null, message: res.ok ? '' : body?.message || `HTTP ${res.status}` };
}

// drainCommand is the command line twin of a drain or undrain.
export const drainCommand = (ns, id, undrain, force) =>
  `leasehold ${undrain ? 'undrain' : 'drain'} ${JSON.stringify(id)} -n ${ns}${force ? ' --force' : ''}`;

let dialog = null;

// openDrainDialog asks to confirm draining (or, with undrain, undraining)
// identity id of namespace ns, does it, and shows the server's record or
// its refusal; a refused drain (the only live candidate of a lease) can
// then be forced. onDone runs after a change.
export function openDrainDialog(ns, id, { undrain = false, onDone = () => {} } = {}) {
  dialog?.remove();
  const title = h('h2', { id: 'drain-title' }, `${undrain ? 'Undrain' : 'Drain'} ${id}?`);
  const text = h('p', { id: 'drain-text' }, undrain
    ? `${id} may be granted leases again, and leasehold run under it campaigns again.`
    : `${id} is never granted a lease again until undrained, whatever the strategy says. ` +
      'A lease it holds is handed over to the next-best candidate that answers, within one lease duration ' +
      '(leasehold run stops its program first). The drain is kept for the identity in this namespace: ' +
      'it survives the LeaseCandidate being deleted and created again.');
  const cmd = h('pre', { class: 'raw', id: 'drain-cmd' }, drainCommand(ns, id, undrain, false));
  const result = h('div', { id: 'drain-result', 'aria-live': 'polite' });
  const cancel = h('button', { type: 'button', class: 'ghost', id: 'drain-cancel', onclick: () => dlg.close() }, 'Cancel');
  const go = h('button', { type: 'button', id: 'drain-confirm' }, undrain ? 'Undrain' : 'Drain');
  const force = h('button', { type: 'button', class: 'danger', id: 'drain-force', hidden: true }, 'Drain anyway');
  const dlg = h('dialog', { id: 'drain-dialog', class: 'wide', 'aria-labelledby': 'drain-title' },
    title, text, h('p', { class: 'muted' }, 'The same as:'), cmd, result, h('div', { class: 'actions' }, cancel, force, go));
  dialog = dlg;
  document.body.append(dlg);
  dlg.addEventListener('close', () => dlg.remove());

  async function run(forced) {
    go.disabled = force.disabled = true;
    result.replaceChildren(h('p', { class: 'muted' }, 'Working…'));
    let r;
    try {
      r = undrain ? await undrainIdentity(ns, id) : await drainIdentity(ns, id, { force: forced });
    } catch (e) {
      r = { ok: false, status: 0, message: `The request failed: ${e.message}` };
    }
    go.hidden = true;
    force.hidden = true;
    setText(cancel, 'Close');
    if (!r.ok) {
      result.replaceChildren(h('p', { class: 'banner', id: 'drain-error', role: 'alert' },
        r.status === 409 ? `Refused: ${r.message}` : `Failed${r.status ? ` (HTTP ${r.status})` : ''}: ${r.message}`));
      if (r.status === 409 && !forced) {
        // Forcing takes the lease out of service: say what it costs.
        result.append(h('p', { id: 'drain-force-cost' }, `Drain anyway: with nobody to hand over to, ${id} is asked to step down ` +
          'and the lease stays vacant until another candidate appears or the drain is lifted.'));
        setText(cmd, drainCommand(ns, id, false, true));
        force.hidden = false;
        force.disabled = false;
      }
      return;
    }
    const d = r.record || {};
    result.replaceChildren(h('p', { class: 'ok', id: 'drain-done' }, undrain
      ? `${id} undrained (it was drained by ${d.by}).`
      : `${id} drained by ${d.by}${d.forced ? ' (forced)' : ''}.`),
    h('p', { class: 'muted' }, 'Recorded by the server in the decision history of its leases.'));
    onDone();
  }
  go.addEventListener('click', () => run(false));
  force.addEventListener('click', () => run(true));
  dlg.showModal();
  cancel.focus();
  return dlg;
}
