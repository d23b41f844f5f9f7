// Operator actions on one lease: ask the holder to step down, force
// release, hand over, delete. Each goes through the Kubernetes API with the
// page's token, as the kubectl line shown next to it would, so it meets the
// same authorization; the server then records it in the lease's decision
// history with the user's name.

import { h, setText, copyButton } from './dom.js';
import { api } from './api.js';
import { toYAML } from './yaml.js';

const GROUP = 'coordination.k8s.io';

// STEP_DOWN asks the holder it names to step down; leasehold run honours it
// (web/client/run.AnnotationStepDown).
const STEP_DOWN = 'leasehold.dev/step-down';

// forceCost says what a forced release costs on this lease.
function forceCost(l) {
  const d = l.duration ? `${l.duration} s` : 'its duration';
  return `leasehold run standbys do not start their program until ${l.holder}'s lease would have expired ` +
    `(its last renewal + ${d} + a tenth for clock drift): the lease does no work until then. ` +
    `${l.holder} stops its program as soon as it sees the change. ` +
    'Other clients (a client-go elector) may take the lease at once and act beside the old holder until it notices.';
}

// An action: what it does, its kubectl twin and its API request.
const ACTIONS = {
  stepdown: {
    label: 'Ask the holder to step down', verb: 'patch', short: 'Ask to step down',
    title: (l) => `Ask ${l.holder} to step down from ${l.ns}/${l.name}?`,
    what: (l) => `Ask ${l.holder} to step down from ${l.ns}/${l.name} (annotation ${STEP_DOWN}). ` +
      'It stops its program, then releases the lease itself, and the next holder starts at once; ' +
      `${l.strategy ? 'the election controller then elects again (it may choose the same holder). ' : 'the holder stands by for one lease duration. '}` +
      'Only holders that honour the annotation do this (leasehold run does); a client-go elector ignores it: use Force release then.',
    kubectl: (l) => `kubectl annotate lease -n ${l.ns} ${l.name} --overwrite '${STEP_DOWN}=${l.holder || '<holder>'}'`,
    request: (l) => ({ method: 'PATCH', type: 'application/merge-patch+json', body: { metadata: { annotations: { [STEP_DOWN]: l.holder } } } }),
  },
  release: {
    label: 'Force release', verb: 'patch', danger: true,
    what: (l) => `Clear the holder of ${l.ns}/${l.name} without asking ${l.holder}. ${forceCost(l)} Prefer asking the holder to step down.`,
    kubectl: (l) => `kubectl patch lease -n ${l.ns} ${l.name} --type=merge -p '{"spec":{"holderIdentity":null}}'`,
    request: () => ({ method: 'PATCH', type: 'application/merge-patch+json', body: { spec: { holderIdentity: null } } }),
  },
  handover: {
    label: 'Hand over', verb: 'patch',
    what: (l, to) => `Set spec.preferredHolder of ${l.ns}/${l.name} to ${to}. ${l.holder || 'The holder'} is asked to step down, and the lease goes to ${to}.`,
    kubectl: (l, to) => `kubectl patch lease -n ${l.ns} ${l.name} --type=merge -p '{"spec":{"preferredHolder":${JSON.stringify(to || '<candidate>')}}}'`,
    request: (l, to) => ({ method: 'PATCH', type: 'application/merge-patch+json', body: { spec: { preferredHolder: to } } }),
  },
  delete: {
    label: 'Delete', verb: 'delete', danger: true,
    what: (l) => `Delete lease ${l.ns}/${l.name}${l.holder ? `, held by ${l.holder}` : ''}. Its clients create it again if they still run.`,
    kubectl: (l) => `kubectl delete lease -n ${l.ns} ${l.name}`,
    // The uid precondition deletes this lease only, not one created
    // since under the same name.
    request: (l) => ({ method: 'DELETE', type: 'application/json', body: { kind: 'DeleteOptions', apiVersion: 'v1', preconditions: { uid: l.uid } } }),
  },
};

// errorOf turns a failed response into a message, the Status's if any.
async function errorOf(res) {
  const body = await res.json().catch(() => null);
  return body?.message || `HTTP ${res.status}`;
}

// actionsPanel builds the Actions section of a lease's detail page.
// onDone runs after an action was recorded (the page re-reads history).
export function actionsPanel(ns, name, onDone) {
  const enc = encodeURIComponent;
  const path = `/apis/${GROUP}/v1/namespaces/${enc(ns)}/leases/${enc(name)}`;
  let cur = { ns, name, holder: '', uid: '', candidates: [], exists: false, duration: 0, strategy: '' };
  // What the server's SelfSubjectAccessReviews said, per verb:
  // {allowed, reason}; undefined while unknown (then the API decides).
  const allowed = {};
  const denied403 = {};

  const target = h('select', { id: 'handover-to', 'aria-label': 'Candidate to hand the lease over to' });
  target.addEventListener('change', () => render());
  const rows = {};
  for (const [key, a] of Object.entries(ACTIONS)) {
    const btn = h('button', { type: 'button', id: `act-${key}`, class: a.danger ? 'danger' : '', onclick: () => confirm(key) }, a.label);
    const why = h('span', { class: 'why muted', id: `why-${key}` });
    const cmd = h('code', { class: 'clip' });
    rows[key] = { btn, why, cmd, el: h('li', { 'data-action': key },
      h('div', { class: 'act' }, key === 'handover' ? [btn, ' to ', target] : btn, why),
      h('div', { class: 'kc' }, cmd, copyButton(() => cmd.textContent, `Copy: kubectl ${a.label.toLowerCase()}`))) };
  }
  const el = h('ul', { class: 'cmds acts', id: 'actions' }, Object.values(rows).map((r) => r.el));

  // The confirmation dialog, which then shows the outcome.
  const dTitle = h('h2', { id: 'action-title' });
  const dText = h('p', { id: 'action-text' });
  const dCmd = h('pre', { class: 'raw', id: 'action-cmd' });
  const dResult = h('div', { id: 'action-result', 'aria-live': 'polite' });
  const dCancel = h('button', { type: 'button', class: 'ghost', id: 'action-cancel', onclick: () => dlg.close() }, 'Cancel');
  const dGo = h('button', { type: 'button', id: 'action-confirm' }, 'Confirm');
  const dlg = h('dialog', { id: 'action-dialog', class: 'wide', 'aria-labelledby': 'action-title' },
    dTitle, dText, h('p', { class: 'muted' }, 'The same as:'), dCmd, dResult, h('div', { class: 'actions' }, dCancel, dGo));
  document.body.append(dlg);
  let pending = null;
  dGo.addEventListener('click', () => pending && pending());

  function confirm(key) {
    const a = ACTIONS[key];
    const to = target.value;
    const snap = { ...cur };
    setText(dTitle, a.title ? a.title(snap) : `${a.label} ${ns}/${name}?`);
    setText(dText, a.what(snap, to));
    setText(dCmd, a.kubectl(snap, to));
    dResult.replaceChildren();
    dGo.hidden = false;
    dGo.disabled = false;
    dGo.className = a.danger ? 'danger' : '';
    setText(dGo, a.short || a.label);
    setText(dCancel, 'Cancel');
    pending = () => run(key, snap, to);
    dlg.showModal();
    dCancel.focus();
  }

  async function run(key, snap, to) {
    const a = ACTIONS[key];
    pending = null;
    dGo.disabled = true;
    dResult.replaceChildren(h('p', { class: 'muted' }, 'Working…'));
    const req = a.request(snap, to);
    let res;
    try {
      res = await api(`${path}?fieldManager=leasehold-ui`, { method: req.method, headers: { 'Content-Type': req.type }, body: JSON.stringify(req.body) });
    } catch (e) {
      return fail(`The request failed: ${e.message}`);
    }
    if (!res.ok) {
      const msg = await errorOf(res);
      // The API is the authority: a 403 disables the action even when
      // the review said yes (or could not be asked).
      if (res.status === 403) { denied403[a.verb] = msg; render(); }
      return fail(`${res.status === 403 ? 'Forbidden' : `Failed (HTTP ${res.status})`}: ${msg}`);
    }
    const obj = await res.json().catch(() => null);
    obj && (obj.apiVersion ||= `${GROUP}/v1`, obj.kind ||= 'Lease');
    if (obj?.metadata) delete obj.metadata.managedFields;
    const done = h('p', { class: 'ok', id: 'action-done' }, key === 'stepdown' ? `Asked ${snap.holder} to step down.` : `${a.label}: done.`);
    const audit = h('p', { id: 'action-audit', class: 'muted' }, 'Recording it in the decision history…');
    dResult.replaceChildren(done, audit, h('p', { class: 'muted' }, key === 'delete' ? 'The deleted object:' : 'The lease now:'),
      h('pre', { class: 'raw', id: 'action-object' }, obj ? toYAML(obj) : '(no body)'));
    dGo.hidden = true;
    setText(dCancel, 'Close');
    try {
      const r = await api(`/ui/api/v1/namespaces/${enc(ns)}/leases/${enc(name)}/actions/${key}`, {
        method: 'POST', headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ holder: snap.holder, target: key === 'handover' ? to : '', uid: snap.uid }),
      });
      if (!r.ok) throw new Error(await errorOf(r));
      const rec = await r.json();
      setText(audit, `Recorded in the decision history: ${rec.reason}.`);
    } catch (e) {
      setText(audit, `Done, but not recorded in the decision history: ${e.message}`);
      audit.className = 'banner';
    }
    onDone();
  }

  function fail(msg) {
    dResult.replaceChildren(h('p', { class: 'banner', id: 'action-error', role: 'alert' }, msg));
    dGo.hidden = true;
    setText(dCancel, 'Close');
  }

  // review asks the server whether the token may use a verb on this lease.
  async function review(verb) {
    try {
      const res = await api('/apis/authorization.k8s.io/v1/selfsubjectaccessreviews', {
        method: 'POST', headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ apiVersion: 'authorization.k8s.io/v1', kind: 'SelfSubjectAccessReview',
          spec: { resourceAttributes: { namespace: ns, verb, group: GROUP, resource: 'leases', name } } }),
      });
      if (!res.ok) return; // no reviews here: the API's 403 will tell
      const st = (await res.json()).status || {};
      allowed[verb] = { allowed: !!st.allowed, reason: st.reason || '' };
    } catch { /* unknown: leave the action to the API */ }
    render();
  }
  function reviewAll() { for (const v of ['patch', 'delete']) review(v); }
  reviewAll();
  const onToken = () => { for (const k of Object.keys(denied403)) delete denied403[k]; for (const k of Object.keys(allowed)) delete allowed[k]; reviewAll(); };
  window.addEventListener('leasehold:token', onToken);

  // disabledWhy is why an action cannot be used now, or ''.
  function disabledWhy(key) {
    const a = ACTIONS[key];
    const rv = allowed[a.verb];
    if (rv && !rv.allowed) return `Not allowed: your token may not ${a.verb} leases in ${ns}${rv.reason ? ` (${rv.reason})` : ''}.`;
    if (denied403[a.verb]) return `Not allowed: ${denied403[a.verb]}`;
    if (!cur.exists) return 'The lease does not exist.';
    if ((key === 'release' || key === 'stepdown') && !cur.holder) return 'The lease has no holder.';
    if (key === 'handover') {
      if (!cur.candidates.length) return 'Only a coordinated lease (one with LeaseCandidates) can be handed over.';
      if (!target.options.length) return 'No other candidate to hand it over to.';
    }
    return '';
  }

  function render() {
    for (const [key, r] of Object.entries(rows)) {
      const why = disabledWhy(key);
      r.btn.disabled = !!why;
      setText(r.why, why);
      r.btn.title = why;
      setText(r.cmd, ACTIONS[key].kubectl(cur, target.value));
      r.cmd.title = r.cmd.textContent;
    }
  }

  return {
    el,
    // update follows the lease (null when missing) and its candidates.
    update(l, cands) {
      const others = cands.map((c) => c.metadata.name).filter((n) => n !== (l?.spec?.holderIdentity || ''));
      cur = { ns, name, exists: !!l, holder: l?.spec?.holderIdentity || '', uid: l?.metadata?.uid || '', candidates: cands,
        duration: l?.spec?.leaseDurationSeconds || 0, strategy: l?.spec?.strategy || '' };
      const have = [...target.options].map((o) => o.value).join('\n');
      if (have !== others.join('\n')) {
        const keep = target.value;
        target.replaceChildren(...others.map((n) => h('option', { value: n }, n)));
        if (others.includes(keep)) target.value = keep;
        else if (others.includes(l?.spec?.preferredHolder)) target.value = l.spec.preferredHolder;
      }
      target.disabled = !others.length;
      render();
    },
    destroy() { window.removeEventListener('leasehold:token', onToken); dlg.remove(); },
  };
}
