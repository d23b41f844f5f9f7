// example.com/oldest-binary-version: an example election strategy in
// AssemblyScript, built with the single-file SDK
// (plugins/sdk/assemblyscript/lease_strategy.ts).
//
// The acked candidate with the oldest valid binary version leads (ties: the
// oldest candidate, then the name): during a rolling upgrade leadership
// stays on the old binaries until the last one is gone. A live holder is
// never preempted; the ranking takes effect when the lease is free.
//
// Settings (oldest-binary-version.json beside the module, optional):
// {"drain": "NAME"} leaves candidate NAME out of the ranking, so that an
// operator can move leadership off a device before servicing it.
//
// Build: ./build.sh (npm ci, then asc; see README.md).
import {
  ABI_VERSION, ACTION_KEEP, ACTION_PREFER, Candidate, Decision, Info, Input, LOG_DEBUG,
  compareVersion, decideWith, log, settingString, writeInfo,
} from "../../../sdk/assemblyscript/lease_strategy";

export function lease_strategy_abi_version(): i32 {
  return ABI_VERSION;
}

export function lease_strategy_info(): i32 {
  const info = new Info("example.com/oldest-binary-version", "0.1.0",
    "The acked candidate with the oldest binary version leads; a live holder is never preempted.");
  info.abiMinor = 1; // reads settings
  return writeInfo(info);
}

export function lease_strategy_decide(): i32 {
  return decideWith(decide);
}

function oldestFirst(a: Candidate, b: Candidate): i32 {
  const c = compareVersion(a.binaryVersion, b.binaryVersion);
  if (c != 0) return c;
  if (a.creationTimeUs != b.creationTimeUs) return a.creationTimeUs < b.creationTimeUs ? -1 : 1;
  return a.name == b.name ? 0 : a.name < b.name ? -1 : 1;
}

function decide(input: Input): Decision | null {
  const drain = settingString(input, "drain");
  const eligible: Candidate[] = [];
  for (let i = 0; i < input.candidates.length; i++) {
    const c = input.candidates[i];
    if (c.acked && c.binaryVersion.valid && c.name != drain) eligible.push(c);
  }
  eligible.sort(oldestFirst);
  const d = new Decision();
  for (let i = 0; i < eligible.length; i++) d.ranking.push(eligible[i].name);
  const lease = input.lease;
  if (eligible.length == 0) {
    d.action = ACTION_KEEP;
    d.reason = "no acked candidate with a valid binary version";
  } else if (lease.exists && !lease.expired && lease.holder.length > 0) {
    d.action = ACTION_KEEP;
    d.reason = "a live holder is never preempted";
  } else {
    d.action = ACTION_PREFER;
    d.reason = eligible[0].name + " has the oldest binary " + eligible[0].binaryVersion.raw;
  }
  log(LOG_DEBUG, "ranked " + eligible.length.toString() + " of " + input.candidates.length.toString() + " candidates");
  return d;
}
