// Operator actions on one lease: ask the holder to step down, force
// release, hand over, delete. Each goes through the Kubernetes API with the
// page's token, as the kubectl line shown next to it would, so it meets the
// same authorization; the server then records it in the lease's decision
// history with the user's name.

import { h, setText, copyButton } from './dom.js';
import { api } from './api.js';
import { toYAML } from './yaml.js';
import { openDrainDialog } from './drain.js';

const GROUP = 'coordination.k8s.io';

// STEP_DOWN asks the holder it names to step down; leasehold run honours it
// (web/client/run.AnnotationStepDown).
const STEP_DOWN = 'leasehold.dev/step-down';

// MANUAL is the spec.strategy a plain lease's hand-over writes beside
// preferredHolder (validation wants one): a name the election controller
// implements none of, so it leaves the lease to its plain electors.
const MANUAL = 'leasehold.dev/manual';

// DRAIN_DOCS is where drain is documented.
const DRAIN_DOCS = 'https://github.com/leasehold/leasehold#coordinated-leader-election-with-pluggable-strategies';

// coordinated: the lease has LeaseCandidates, so the election controller
// decides who gets it; a plain lease is left to its electors.
const coordinated = (l) => l.candidates.length > 0;

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
    what: (l, to) => coordinated(l)
      ? `Set spec.preferredHolder of ${l.ns}/${l.name} to ${to}. ${l.holder || 'The holder'} is asked to step down, and the election controller ` +
        'gives the lease to whom the lease\'s strategy picks.'
      : `Set spec.preferredHolder of ${l.ns}/${l.name} to ${to} (with spec.strategy ${MANUAL}, which validation requires and the election controller leaves alone). ` +
        `${l.holder || 'The holder'} stops its program and releases the lease if it is leasehold run, and ${to} then has one lease duration to take it before the other standbys. ` +
        'A client-go elector ignores preferredHolder (and clears it as it renews).',
    kubectl: (l, to) => coordinated(l)
      ? `kubectl patch lease -n ${l.ns} ${l.name} --type=merge -p '{"spec":{"preferredHolder":${JSON.stringify(to || '<candidate>')}}}'`
      : `kubectl patch lease -n ${l.ns} ${l.name} --type=merge -p '{"spec":{"strategy":"${MANUAL}","preferredHolder":${JSON.stringify(to || '<identity>')}}}'`,
    request: (l, to) => ({ method: 'PATCH', type: 'application/merge-patch+json',
      body: { spec: coordinated(l) ? { preferredHolder: to } : { strategy: MANUAL, preferredHolder: to } } }),
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

  const pick = h('select', { id: 'handover-to', 'aria-label': 'Candidate to hand the lease over to' });
  pick.addEventListener('change', () => render());
  // A plain lease has no candidates to pick from: the operator names the
  // identity (a leasehold run's --identity).
  const ident = h('input', { type: 'text', id: 'handover-id', hidden: true, placeholder: 'identity', spellcheck: 'false',
    autocomplete: 'off', 'aria-label': 'Identity to hand the lease over to' });
  ident.addEventListener('input', () => render());
  const target = { get value() { return coordinated(cur) ? pick.value : ident.value.trim(); } };
  const rows = {};
  for (const [key, a] of Object.entries(ACTIONS)) {
    const btn = h('button', { type: 'button', id: `act-${key}`, class: a.danger ? 'danger' : '', onclick: () => confirm(key) }, a.label);
    const why = h('span', { class: 'why muted', id: `why-${key}` });
    const cmd = h('code', { class: 'clip' });
    rows[key] = { btn, why, cmd, el: h('li', { 'data-action': key },
      h('div', { class: 'act' }, key === 'handover' ? [btn, ' to ', pick, ident] : btn, why),
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
  // follow is the hand-over being watched until the lease shows its
  // outcome; asked counts dialogs, so that a late preview answer for an
  // earlier one is dropped.
  let follow = null;
  let asked = 0;

  function confirm(key) {
    const a = ACTIONS[key];
    const to = target.value;
    const snap = { ...cur };
    stopFollowing();
    asked++;
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
    if (key === 'handover' && coordinated(snap)) preview(snap, to, asked);
  }

  // preview asks the server what the election controller would do with
  // the hand-over, through the lease's strategy, before anything is
  // written; a hand-over the strategy would undo is not offered.
  async function preview(snap, to, n) {
    dGo.disabled = true;
    dResult.replaceChildren(h('p', { class: 'muted', id: 'action-preview' }, `Asking the lease's strategy what it would do with ${to}…`));
    let p, err;
    try {
      const res = await api(`/ui/api/v1/namespaces/${enc(ns)}/leases/${enc(name)}/handover-preview`, {
        method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ candidate: to }) });
      if (res.ok) p = await res.json();
      else err = await errorOf(res);
    } catch (e) {
      err = e.message;
    }
    if (n !== asked || !dlg.open) return;
    if (!p) {
      dResult.replaceChildren(h('p', { class: 'banner', id: 'action-preview' },
        `Could not ask the strategy what it would do (${err}). The election controller may undo the hand-over; the result will say what happened.`));
      dGo.disabled = false;
      return;
    }
    if (p.keeps) {
      dResult.replaceChildren(h('p', { class: 'ok', id: 'action-preview' }, p.message));
      dGo.disabled = false;
      return;
    }
    const out = [h('p', { class: 'banner', id: 'action-refused', role: 'alert' }, `This hand-over would be undone. ${p.message}`)];
    if (snap.holder) {
      const cmd = `leasehold drain ${snap.holder} -n ${ns}`;
      out.push(h('div', { id: 'action-drain' },
        h('p', {}, `To take ${snap.holder} out of the lease, drain it instead: a drained holder hands over gracefully to the next-best candidate, `,
          'and is not chosen again until it is undrained. ', h('a', { href: DRAIN_DOCS, target: '_blank', rel: 'noopener' }, 'Drain in the docs'), '.'),
        h('pre', { class: 'raw' }, cmd),
        h('button', { type: 'button', id: 'action-drain-instead', onclick: () => {
          dlg.close();
          openDrainDialog(ns, snap.holder, { onDone: () => {} });
        } }, `Drain ${snap.holder} instead…`)));
    }
    dResult.replaceChildren(...out);
    dGo.hidden = true;
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
    // A hand-over is done only when the lease shows the new holder: until
    // then the page says what it asked, and then what happened.
    const done = key === 'handover'
      ? h('p', { class: 'muted', id: 'action-pending' }, `Asked ${snap.holder || 'the holder'} to hand ${ns}/${name} over to ${to}. Waiting for ${to} to hold it…`)
      : h('p', { class: 'ok', id: 'action-done' }, key === 'stepdown' ? `Asked ${snap.holder} to step down.` : `${a.label}: done.`);
    const audit = h('p', { id: 'action-audit', class: 'muted' }, 'Recording it in the decision history…');
    dResult.replaceChildren(done, audit, h('p', { class: 'muted' }, key === 'delete' ? 'The deleted object:' : 'The lease now:'),
      h('pre', { class: 'raw', id: 'action-object' }, obj ? toYAML(obj) : '(no body)'));
    dGo.hidden = true;
    setText(dCancel, 'Close');
    if (key === 'handover' && obj?.metadata) startFollowing(snap, to, obj, done);
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

  // startFollowing watches the lease (through update, which the page's
  // watch drives) until the hand-over shows its outcome, or a deadline:
  // two lease durations and 5 s, between 15 s and 2 min.
  function startFollowing(snap, to, patched, el) {
    const secs = Math.min(Math.max(2 * (snap.duration || 0) + 5, 15), 120);
    follow = { to, from: snap.holder, uid: patched.metadata.uid, rv: patched.metadata.resourceVersion, el, coordinated: coordinated(snap), last: patched };
    follow.timer = setTimeout(() => {
      const l = follow?.last;
      finish(false, `${to} does not hold the lease ${secs} s after the hand-over (holder: ${l?.spec?.holderIdentity || 'none'}, ` +
        `preferredHolder: ${l?.spec?.preferredHolder || 'none'}): the hand-over is not done.`);
    }, secs * 1000);
    judge(patched);
  }

  function stopFollowing() {
    if (follow) clearTimeout(follow.timer);
    follow = null;
  }

  // notOlder compares resourceVersions, which leasehold serves as numbers
  // (the etcd revision); events come in order anyway.
  function notOlder(a, b) {
    try { return BigInt(a) >= BigInt(b); } catch { return a === b; }
  }

  function judge(l) {
    const f = follow;
    if (!f) return;
    if (!l || l.metadata?.uid !== f.uid) return finish(false, `The lease was deleted before ${f.to} held it.`);
    if (!notOlder(l.metadata.resourceVersion, f.rv)) return;
    f.last = l;
    const holder = l.spec?.holderIdentity || '';
    const pref = l.spec?.preferredHolder || '';
    if (holder === f.to) return finish(true, `${f.to} now holds ${ns}/${name}.`);
    if (holder && holder !== f.from) return finish(false, `Not handed over: the lease went to ${holder}, not ${f.to}.`);
    if (holder && pref !== f.to) {
      if (pref) return finish(false, `Not handed over: preferredHolder is now ${pref}, and ${holder} still holds the lease.`);
      return finish(false, `Not handed over: preferredHolder was cleared and ${holder} still holds the lease` +
        (f.coordinated ? ' (the election controller cleared it: the decision history says why).' : ' (a client-go elector clears it as it renews).'));
    }
  }

  function finish(ok, msg) {
    const f = follow;
    if (!f) return;
    stopFollowing();
    f.el.replaceWith(h('p', ok ? { class: 'ok', id: 'action-done' } : { class: 'banner', id: 'action-undone', role: 'alert' }, msg));
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
      if (coordinated(cur)) {
        if (!pick.options.length) return 'No other candidate to hand it over to.';
      } else {
        if (!cur.holder) return 'The lease has no holder.';
        if (!target.value) return 'Name the identity to hand the lease over to.';
        if (target.value === cur.holder) return `${cur.holder} holds the lease already.`;
      }
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
      const have = [...pick.options].map((o) => o.value).join('\n');
      if (have !== others.join('\n')) {
        const keep = pick.value;
        pick.replaceChildren(...others.map((n) => h('option', { value: n }, n)));
        if (others.includes(keep)) pick.value = keep;
        else if (others.includes(l?.spec?.preferredHolder)) pick.value = l.spec.preferredHolder;
      }
      pick.disabled = !others.length;
      pick.hidden = !coordinated(cur);
      ident.hidden = coordinated(cur);
      render();
      judge(l);
    },
    destroy() { stopFollowing(); window.removeEventListener('leasehold:token', onToken); dlg.remove(); },
  };
}
