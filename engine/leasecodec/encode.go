package leasecodec

import (
	"bytes"
	"slices"
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// appendLeaseJSON appends a Lease exactly as the JSON serializer writes it
// (encoding/json of the Go type: field order, omitempty, sorted map keys,
// times in UTC at second or microsecond precision, HTML-safe escaping), for
// GET and PUT responses, list items and watch events: the serializer's
// reflection costs a tenth of a renewal, and once per watcher per event.
//
// It returns ok false, having appended nothing useful, for anything it does
// not reproduce exactly: strings that need escaping, ownerReferences,
// FieldsV1 that is not compact plain ASCII. The caller then uses the
// serializer. TestFastEncodeLease and FuzzFastEncodeLease compare both.
func appendLeaseJSON(b []byte, l *coordinationv1.Lease, typeMeta bool) ([]byte, bool) {
	return appendLeaseJSONMemo(b, l, typeMeta, nil)
}

// appendLeaseJSONMemo is appendLeaseJSON; fieldsOK, when set, carries the
// last fieldsV1 found valid from one call to the next (list items).
func appendLeaseJSONMemo(b []byte, l *coordinationv1.Lease, typeMeta bool, fieldsOK *[]byte) ([]byte, bool) {
	m := &l.ObjectMeta
	if len(m.OwnerReferences) > 0 {
		return b, false
	}
	w := jsonOut{b: b, ok: true, first: true}
	if fieldsOK != nil {
		w.fieldsOK = *fieldsOK
		defer func() { *fieldsOK = w.fieldsOK }()
	}
	w.raw(`{`)
	if typeMeta {
		w.field(`"kind":`, l.Kind, true)
		w.field(`"apiVersion":`, l.APIVersion, false)
	}
	w.sep()
	w.raw(`"metadata":{`)
	w.first = true
	w.field(`"name":`, m.Name, true)
	w.field(`"generateName":`, m.GenerateName, true)
	w.field(`"namespace":`, m.Namespace, true)
	w.field(`"selfLink":`, m.SelfLink, true)
	w.field(`"uid":`, string(m.UID), true)
	w.field(`"resourceVersion":`, m.ResourceVersion, true)
	if m.Generation != 0 {
		w.sep()
		w.raw(`"generation":`)
		w.b = strconv.AppendInt(w.b, m.Generation, 10)
	}
	if !m.CreationTimestamp.IsZero() { // omitzero
		w.sep()
		w.raw(`"creationTimestamp":`)
		w.time(m.CreationTimestamp.Time, time.RFC3339)
	}
	if m.DeletionTimestamp != nil {
		w.sep()
		w.raw(`"deletionTimestamp":`)
		w.time(m.DeletionTimestamp.Time, time.RFC3339)
	}
	if m.DeletionGracePeriodSeconds != nil {
		w.sep()
		w.raw(`"deletionGracePeriodSeconds":`)
		w.b = strconv.AppendInt(w.b, *m.DeletionGracePeriodSeconds, 10)
	}
	w.stringMap(`"labels":`, m.Labels)
	w.stringMap(`"annotations":`, m.Annotations)
	if len(m.Finalizers) > 0 {
		w.sep()
		w.raw(`"finalizers":[`)
		for i, f := range m.Finalizers {
			if i > 0 {
				w.raw(`,`)
			}
			w.str(f)
		}
		w.raw(`]`)
	}
	if len(m.ManagedFields) > 0 {
		w.sep()
		w.raw(`"managedFields":[`)
		for i := range m.ManagedFields {
			if i > 0 {
				w.raw(`,`)
			}
			w.managedEntry(&m.ManagedFields[i])
		}
		w.raw(`]`)
	}
	w.raw(`},"spec":{`)
	w.first = true
	s := &l.Spec
	if s.HolderIdentity != nil {
		w.field(`"holderIdentity":`, *s.HolderIdentity, false)
	}
	if s.LeaseDurationSeconds != nil {
		w.sep()
		w.raw(`"leaseDurationSeconds":`)
		w.b = strconv.AppendInt(w.b, int64(*s.LeaseDurationSeconds), 10)
	}
	if s.AcquireTime != nil {
		w.sep()
		w.raw(`"acquireTime":`)
		w.time(s.AcquireTime.Time, metav1.RFC3339Micro)
	}
	if s.RenewTime != nil {
		w.sep()
		w.raw(`"renewTime":`)
		w.time(s.RenewTime.Time, metav1.RFC3339Micro)
	}
	if s.LeaseTransitions != nil {
		w.sep()
		w.raw(`"leaseTransitions":`)
		w.b = strconv.AppendInt(w.b, int64(*s.LeaseTransitions), 10)
	}
	if s.Strategy != nil {
		w.field(`"strategy":`, string(*s.Strategy), false)
	}
	if s.PreferredHolder != nil {
		w.field(`"preferredHolder":`, *s.PreferredHolder, false)
	}
	w.raw(`}}`)
	return w.b, w.ok
}

// jsonOut appends JSON members, remembering whether a separator is due.
type jsonOut struct {
	b     []byte
	first bool
	ok    bool
	// fieldsOK is the last fieldsV1 that passed compactASCII.
	fieldsOK []byte
}

func (w *jsonOut) raw(s string) { w.b = append(w.b, s...) }

func (w *jsonOut) sep() {
	if !w.first {
		w.b = append(w.b, ',')
	}
	w.first = false
}

// field writes a string member; omitEmpty skips "" (omitempty).
func (w *jsonOut) field(key, v string, omitEmpty bool) {
	if omitEmpty && v == "" {
		return
	}
	w.sep()
	w.raw(key)
	w.str(v)
}

// str writes a string that needs no escaping; anything else makes the
// whole encoding fall back.
func (w *jsonOut) str(s string) {
	for i := 0; i < len(s); i++ {
		if needsEscape[s[i]] {
			w.ok = false
			return
		}
	}
	w.b = append(w.b, '"')
	w.b = append(w.b, s...)
	w.b = append(w.b, '"')
}

// needsEscape marks the bytes str refuses: control characters, non-ASCII,
// and what encoding/json escapes ('"', '\\', and '<', '>', '&' as HTML).
var needsEscape = func() (t [256]bool) {
	for c := range 256 {
		t[c] = c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&'
	}
	return t
}()

// time writes metav1.Time (RFC 3339) or MicroTime (with microseconds) as
// their MarshalJSON does: null when zero, else UTC.
func (w *jsonOut) time(t time.Time, layout string) {
	if t.IsZero() {
		w.raw(`null`)
		return
	}
	w.b = append(w.b, '"')
	w.b = appendUTC(w.b, t.UTC(), layout == metav1.RFC3339Micro)
	w.b = append(w.b, '"')
}

// appendUTC is AppendFormat of a UTC time in time.RFC3339 or
// metav1.RFC3339Micro (micro), without the layout interpretation, which
// costs as much as the rest of a lease's encoding.
func appendUTC(b []byte, t time.Time, micro bool) []byte {
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		if micro {
			return t.AppendFormat(b, metav1.RFC3339Micro)
		}
		return t.AppendFormat(b, time.RFC3339)
	}
	hour, minute, sec := t.Clock()
	b = append(b, byte('0'+year/1000), byte('0'+year/100%10), byte('0'+year/10%10), byte('0'+year%10), '-',
		byte('0'+int(month)/10), byte('0'+int(month)%10), '-', byte('0'+day/10), byte('0'+day%10), 'T',
		byte('0'+hour/10), byte('0'+hour%10), ':', byte('0'+minute/10), byte('0'+minute%10), ':',
		byte('0'+sec/10), byte('0'+sec%10))
	if micro {
		us := t.Nanosecond() / 1000
		b = append(b, '.', byte('0'+us/100000), byte('0'+us/10000%10), byte('0'+us/1000%10),
			byte('0'+us/100%10), byte('0'+us/10%10), byte('0'+us%10))
	}
	return append(b, 'Z')
}

func (w *jsonOut) stringMap(key string, m map[string]string) {
	if len(m) == 0 {
		return
	}
	w.sep()
	w.raw(key)
	w.raw(`{`)
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		if i > 0 {
			w.raw(`,`)
		}
		w.str(k)
		w.raw(`:`)
		w.str(m[k])
	}
	w.raw(`}`)
}

func (w *jsonOut) managedEntry(e *metav1.ManagedFieldsEntry) {
	w.raw(`{`)
	w.first = true
	w.field(`"manager":`, e.Manager, true)
	w.field(`"operation":`, string(e.Operation), true)
	w.field(`"apiVersion":`, e.APIVersion, true)
	if e.Time != nil {
		w.sep()
		w.raw(`"time":`)
		w.time(e.Time.Time, time.RFC3339)
	}
	w.field(`"fieldsType":`, e.FieldsType, true)
	if e.FieldsV1 != nil {
		// The leases of a list usually carry identical fieldsV1: check
		// each distinct one once.
		if raw := e.FieldsV1.Raw; !bytes.Equal(raw, w.fieldsOK) || len(raw) == 0 {
			if !compactASCII(raw) {
				w.ok = false
				return
			}
			w.fieldsOK = raw
		}
		w.sep()
		w.raw(`"fieldsV1":`)
		w.b = append(w.b, e.FieldsV1.Raw...)
	}
	w.field(`"subresource":`, e.Subresource, true)
	w.raw(`}`)
	w.first = false
}

// compactASCII: raw JSON that encoding/json's compaction leaves unchanged
// (no whitespace, nothing HTML-escaped, ASCII, and not empty, which
// FieldsV1.MarshalJSON would turn into null).
func compactASCII(raw []byte) bool {
	if len(raw) == 0 || raw[0] != '{' {
		return false
	}
	for _, c := range raw {
		if c <= ' ' || c >= 0x7f || c == '<' || c == '>' || c == '&' || c == '\\' {
			return false
		}
	}
	// And well-formed: the serializer fails on anything else.
	d := jsonScan{b: raw}
	return d.fieldsObject(0) && d.i == len(raw)
}

// JSON renders a Lease response body as the serializer does (with the
// trailing newline of json.Encoder); ok false means use the serializer.
func JSON(l *coordinationv1.Lease) ([]byte, bool) {
	if l.Kind != "Lease" || l.APIVersion != "coordination.k8s.io/v1" {
		return nil, false
	}
	b, ok := appendLeaseJSON(make([]byte, 0, 1024), l, true)
	return append(b, '\n'), ok
}

// ListJSON renders a LeaseList response body; ok false means use the
// serializer.
func ListJSON(l *coordinationv1.LeaseList) ([]byte, bool) {
	if l.Kind != "LeaseList" || l.APIVersion != "coordination.k8s.io/v1" {
		return nil, false
	}
	w := jsonOut{b: make([]byte, 0, 256+len(l.Items)*900), ok: true, first: true}
	w.raw(`{"kind":"LeaseList","apiVersion":"coordination.k8s.io/v1","metadata":{`)
	w.field(`"selfLink":`, l.SelfLink, true)
	w.field(`"resourceVersion":`, l.ResourceVersion, true)
	w.field(`"continue":`, l.Continue, true)
	if l.RemainingItemCount != nil {
		w.sep()
		w.raw(`"remainingItemCount":`)
		w.b = strconv.AppendInt(w.b, *l.RemainingItemCount, 10)
	}
	w.raw(`},"items":[`)
	if !w.ok {
		return nil, false
	}
	ok := true
	for i := range l.Items {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		it := &l.Items[i]
		if it.Kind != "" || it.APIVersion != "" {
			return nil, false
		}
		if w.b, ok = appendLeaseJSONMemo(w.b, it, false, &w.fieldsOK); !ok {
			return nil, false
		}
	}
	if l.Items == nil {
		w.b = w.b[:len(w.b)-1]
		w.raw(`null`)
	} else {
		w.raw(`]`)
	}
	w.raw("}\n")
	return w.b, ok
}

// AppendEventJSON appends the JSON watch frame of a Lease event,
// {"type":...,"object":...} and a newline, as the serializer writes a
// metav1.WatchEvent around the embedded object. Only an object as the
// engine's watches hand out qualifies: TypeMeta and resourceVersion set.
func AppendEventJSON(b []byte, typ string, l *coordinationv1.Lease) ([]byte, bool) {
	if l.Kind != "Lease" || l.APIVersion != "coordination.k8s.io/v1" || l.ResourceVersion == "" {
		return nil, false
	}
	w := jsonOut{b: b, ok: true}
	w.raw(`{"type":`)
	w.str(typ)
	w.raw(`,"object":`)
	out, ok := appendLeaseJSON(w.b, l, true)
	if !ok || !w.ok {
		return nil, false
	}
	return append(out, "}\n"...), true
}
