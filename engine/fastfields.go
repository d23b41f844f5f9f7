package engine

import (
	"bytes"
	"maps"
	"reflect"
	"slices"
	"sort"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// The renewal fast path for managedFields.
//
// A lease renewal (client-go's LeaseLock, kubelet's node lease, "leasehold
// run") is a PUT of the object just read with a new spec.renewTime: same
// manager, same managedFields, only values of fields that manager already
// owns changed. For that shape the result of the field manager stack is
// known without running it (about 80% of an update's CPU: two conversions
// to typed values, a validation walk and a compare):
//
//   - FieldManager.Update decodes the request's managedFields (they equal
//     the live ones here) and the stack reaches structured-merge-diff's
//     Updater.Update with manager "current-operation".
//   - The compare of live and new finds only Modified leaves (no Added,
//     no Removed): the changed spec values. "current-operation" gets
//     exactly them; no other manager owns one (checked), so the conflict
//     and removal steps leave every other entry unchanged, and no entry
//     becomes empty.
//   - managedFieldsUpdater merges "current-operation" into the request's
//     manager, whose set already holds those leaves, so its set is
//     unchanged, and stamps its time with time.Now().UTC() - only when
//     something changed (an unchanged object leaves every time alone).
//   - strip-meta, the cap of 10 update managers and skip-non-applied
//     change nothing for a set without metadata paths, at most 10 update
//     entries and a non-empty managedFields list.
//   - The entries are encoded again (FieldsV1 from the decoded set: the
//     same bytes when they were canonical, which is checked) and sorted by
//     operation, time in seconds, manager, apiVersion and subresource.
//
// So the fast path copies the request's entries, refreshes that manager's
// time when a value changed, and sorts like upstream. Anything else -
// another manager owning a changed field, a field appearing or
// disappearing, any metadata change, several apiVersions, a non-canonical
// FieldsV1, duplicate managers - takes the full field manager. The
// differential test in fastfields_test.go runs random updates through
// both and requires identical objects.

// fastKind describes the fields of one kind that the fast path compares.
type fastKind struct {
	// leaves are the spec fields, as managedFields paths; bit i of a mask
	// is leaves[i].
	leaves []fieldpath.Path
	// specDiff compares the specs of live and new: the mask of changed
	// leaves, or ok false when a field appeared, disappeared or cannot be
	// compared cheaply.
	specDiff func(live, n object) (changed uint64, ok bool)
	// meta returns the object's ObjectMeta.
	meta func(o object) *metav1.ObjectMeta

	mu    sync.Mutex
	cache map[string]fieldsInfo // by FieldsV1 bytes
}

// fieldsInfo is what the fast path needs of one FieldsV1 value.
type fieldsInfo struct {
	ok   bool   // parsed, and encodes back to the same bytes
	mask uint64 // which leaves are members
}

// maxFieldsCache bounds the FieldsV1 cache; renewals reuse a handful of
// distinct values, so a full cache is simply dropped.
const maxFieldsCache = 4096

func (fk *fastKind) info(raw []byte) fieldsInfo {
	fk.mu.Lock()
	fi, ok := fk.cache[string(raw)]
	fk.mu.Unlock()
	if ok {
		return fi
	}
	var set fieldpath.Set
	if err := set.FromJSON(bytes.NewReader(raw)); err == nil {
		if enc, err := set.ToJSON(); err == nil && bytes.Equal(enc, raw) {
			fi.ok = true
			for i, p := range fk.leaves {
				if set.Has(p) {
					fi.mask |= 1 << i
				}
			}
		}
	}
	fk.mu.Lock()
	if len(fk.cache) >= maxFieldsCache {
		clear(fk.cache)
	}
	fk.cache[string(raw)] = fi
	fk.mu.Unlock()
	return fi
}

// maxUpdateManagers is the field manager's cap on Update entries
// (DefaultMaxUpdateManagers); beyond it the stack merges entries.
const maxUpdateManagers = 10

// fastUpdate sets n's managedFields as FieldManager.UpdateNoErrors(live,
// n, manager) would, for the renewal shape described above, and reports
// whether it could. apiVersion is the field manager's version, which must
// be the storage version (live and n are storage-version objects).
func (k *kind) fastUpdate(live, n object, manager, apiVersion string) bool {
	fk := k.fast
	if fk == nil || apiVersion != k.storageGV.String() {
		return false
	}
	if manager == "" {
		manager = "unknown" // buildManagerInfo's default
	}
	entries := n.GetManagedFields()
	liveEntries := live.GetManagedFields()
	if len(entries) == 0 || len(entries) != len(liveEntries) {
		return false
	}
	mine := -1
	updates := 0
	var masks [maxUpdateManagers + 8]uint64
	if len(entries) > len(masks) {
		return false
	}
	for i := range entries {
		e := &entries[i]
		if !sameEntry(e, &liveEntries[i]) || e.APIVersion != apiVersion || e.FieldsType != "FieldsV1" ||
			e.FieldsV1 == nil || e.Subresource != "" {
			return false
		}
		switch e.Operation {
		case metav1.ManagedFieldsOperationUpdate:
			updates++
			if e.Manager == manager {
				mine = i
			}
		case metav1.ManagedFieldsOperationApply:
		default:
			return false
		}
		// Canonical order, hence no duplicate identifiers either (the
		// order is strict between distinct identifiers).
		if i > 0 && !managedEntryLess(&entries[i-1], e) {
			return false
		}
		fi := fk.info(e.FieldsV1.Raw)
		if !fi.ok {
			return false
		}
		masks[i] = fi.mask
	}
	if mine < 0 || updates > maxUpdateManagers {
		return false
	}
	lm, nm := fk.meta(live), fk.meta(n)
	if !sameMeta(lm, nm) {
		return false
	}
	changed, ok := fk.specDiff(live, n)
	if !ok {
		return false
	}
	if changed != 0 {
		if masks[mine]&changed != changed {
			return false
		}
		for i := range entries {
			if i != mine && masks[i]&changed != 0 {
				return false
			}
		}
		out := slices.Clone(entries)
		out[mine].Time = &metav1.Time{Time: time.Now().UTC()}
		sort.Slice(out, func(i, j int) bool { return managedEntryLess(&out[i], &out[j]) })
		nm.ManagedFields = out
	}
	// The slow path's conversion to the versioned type sets TypeMeta.
	setGVK(n, k.storageGV.WithKind(k.res.Kind))
	return true
}

// sameEntry: equal in everything the field manager reads, times to the
// second (what is stored and served).
func sameEntry(a, b *metav1.ManagedFieldsEntry) bool {
	if a.Manager != b.Manager || a.Operation != b.Operation || a.APIVersion != b.APIVersion ||
		a.FieldsType != b.FieldsType || a.Subresource != b.Subresource {
		return false
	}
	if (a.FieldsV1 == nil) != (b.FieldsV1 == nil) || (a.FieldsV1 != nil && !bytes.Equal(a.FieldsV1.Raw, b.FieldsV1.Raw)) {
		return false
	}
	return entrySeconds(a) == entrySeconds(b)
}

func entrySeconds(e *metav1.ManagedFieldsEntry) int64 {
	if e.Time == nil {
		return 0
	}
	return e.Time.Unix()
}

// managedEntryLess is the field manager's order of encoded entries
// (sortEncodedManagedFields).
func managedEntryLess(p, q *metav1.ManagedFieldsEntry) bool {
	if p.Operation != q.Operation {
		return p.Operation < q.Operation
	}
	if ps, qs := entrySeconds(p), entrySeconds(q); ps != qs {
		return ps < qs
	}
	if p.Manager != q.Manager {
		return p.Manager < q.Manager
	}
	if p.APIVersion != q.APIVersion {
		return p.APIVersion < q.APIVersion
	}
	return p.Subresource < q.Subresource
}

// sameMeta: ObjectMeta equal apart from managedFields, so that the typed
// compare finds no metadata change. nil and empty collections count as
// different (their typed forms might), which only sends such requests to
// the slow path.
func sameMeta(a, b *metav1.ObjectMeta) bool {
	return a.Name == b.Name && a.GenerateName == b.GenerateName && a.Namespace == b.Namespace &&
		a.SelfLink == b.SelfLink && a.UID == b.UID && a.ResourceVersion == b.ResourceVersion &&
		a.Generation == b.Generation && a.CreationTimestamp.Equal(&b.CreationTimestamp) &&
		a.DeletionTimestamp == nil && b.DeletionTimestamp == nil &&
		a.DeletionGracePeriodSeconds == nil && b.DeletionGracePeriodSeconds == nil &&
		(a.Labels == nil) == (b.Labels == nil) && maps.Equal(a.Labels, b.Labels) &&
		(a.Annotations == nil) == (b.Annotations == nil) && maps.Equal(a.Annotations, b.Annotations) &&
		(a.Finalizers == nil) == (b.Finalizers == nil) && slices.Equal(a.Finalizers, b.Finalizers) &&
		(a.OwnerReferences == nil) == (b.OwnerReferences == nil) && reflect.DeepEqual(a.OwnerReferences, b.OwnerReferences)
}

// specCmp accumulates a spec comparison leaf by leaf.
type specCmp struct {
	changed uint64
	bad     bool
	bit     uint
}

func (c *specCmp) next() uint64 {
	b := uint64(1) << c.bit
	c.bit++
	return b
}

// ptr compares an optional scalar: present on one side only is an Added or
// Removed field, which the fast path leaves to the field manager.
func ptrCmp[T comparable](c *specCmp, a, b *T) {
	bit := c.next()
	switch {
	case a == nil && b == nil:
	case a == nil || b == nil:
		c.bad = true
	case *a != *b:
		c.changed |= bit
	}
}

// str compares a string field; a change to or from "" may be a field
// appearing (omitempty), so it goes to the field manager.
func strCmp[T ~string](c *specCmp, a, b T) {
	bit := c.next()
	if a != b {
		if a == "" || b == "" {
			c.bad = true
		}
		c.changed |= bit
	}
}

// micro compares an optional MicroTime as its typed value: the RFC 3339
// string with microseconds in UTC (MarshalJSON); zero times (null) go to
// the field manager.
func microCmp(c *specCmp, a, b *metav1.MicroTime) {
	bit := c.next()
	switch {
	case a == nil && b == nil:
		return
	case a == nil || b == nil || a.IsZero() || b.IsZero():
		c.bad = true
		return
	}
	var x, y [40]byte
	if !bytes.Equal(a.UTC().AppendFormat(x[:0], metav1.RFC3339Micro), b.UTC().AppendFormat(y[:0], metav1.RFC3339Micro)) {
		c.changed |= bit
	}
}
