package leasecodec

import (
	"bytes"
	"strconv"
	"time"
	"unicode/utf8"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// DecodeJSON decodes a coordination.k8s.io/v1 Lease body of the shape
// clients send on the renewal path (client-go's LeaseLock PUTs the object
// it read) without the strict JSON serializer, which costs a quarter of a
// renewal's CPU: it decodes twice (once to find apiVersion and kind) and
// through reflection.
//
// It is all-or-nothing: it returns ok only for bodies where it is certain
// to produce exactly what the strict serializer produces - apiVersion and
// kind present and equal to the endpoint's (so the decoded GVK is the
// same), every key a known field in its exact case and present once,
// strings without escapes and in valid UTF-8, integers as plain decimal
// literals, and well-formed JSON. Anything else (unknown or duplicate
// fields, which produce warnings or errors, ownerReferences, escapes,
// nulls other than for times, floats, ...) returns ok false and the caller
// uses the serializer. FuzzFastDecodeLease checks the equivalence.
func DecodeJSON(body []byte) (*coordinationv1.Lease, bool) {
	d := jsonScan{b: body}
	l := &coordinationv1.Lease{}
	var seen uint8
	ok := d.object(func(key []byte) bool {
		var bit uint8
		switch string(key) {
		case "apiVersion":
			bit = 1
			v, ok := d.str()
			if !ok || v != "coordination.k8s.io/v1" {
				return false
			}
			l.APIVersion = "coordination.k8s.io/v1"
		case "kind":
			bit = 2
			v, ok := d.str()
			if !ok || v != "Lease" {
				return false
			}
			l.Kind = "Lease"
		case "metadata":
			bit = 4
			if !d.objectMeta(&l.ObjectMeta) {
				return false
			}
		case "spec":
			bit = 8
			if !d.leaseSpec(&l.Spec) {
				return false
			}
		default:
			return false
		}
		if seen&bit != 0 {
			return false
		}
		seen |= bit
		return true
	})
	if !ok || seen&3 != 3 || !d.end() {
		return nil, false
	}
	return l, true
}

// jsonScan is a strict cursor over a JSON document for DecodeJSON:
// every method returns false on anything it does not fully understand.
type jsonScan struct {
	b []byte
	i int
}

func (d *jsonScan) ws() {
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// next consumes c after optional whitespace.
func (d *jsonScan) next(c byte) bool {
	d.ws()
	if d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

func (d *jsonScan) peek(c byte) bool {
	d.ws()
	return d.i < len(d.b) && d.b[d.i] == c
}

// end: only whitespace remains.
func (d *jsonScan) end() bool {
	d.ws()
	return d.i == len(d.b)
}

// rawStr reads a string without escapes or control characters, in valid
// UTF-8, and returns its bytes (aliasing the input).
func (d *jsonScan) rawStr() ([]byte, bool) {
	if !d.next('"') {
		return nil, false
	}
	start := d.i
	ascii := true
	for d.i < len(d.b) {
		c := d.b[d.i]
		switch {
		case c == '"':
			s := d.b[start:d.i]
			d.i++
			if !ascii && !utf8.Valid(s) {
				return nil, false
			}
			return s, true
		case c == '\\' || c < 0x20:
			return nil, false
		case c >= 0x80:
			ascii = false
		}
		d.i++
	}
	return nil, false
}

func (d *jsonScan) str() (string, bool) {
	b, ok := d.rawStr()
	return string(b), ok
}

// object iterates an object's members: each is called after the key and
// colon and must consume the value.
func (d *jsonScan) object(each func(key []byte) bool) bool {
	if !d.next('{') {
		return false
	}
	if d.next('}') {
		return true
	}
	for {
		key, ok := d.rawStr()
		if !ok || !d.next(':') || !each(key) {
			return false
		}
		if d.next(',') {
			continue
		}
		return d.next('}')
	}
}

// array iterates an array's elements.
func (d *jsonScan) array(each func() bool) bool {
	if !d.next('[') {
		return false
	}
	if d.next(']') {
		return true
	}
	for {
		if !each() {
			return false
		}
		if d.next(',') {
			continue
		}
		return d.next(']')
	}
}

// integer reads a plain decimal integer literal within [min, max].
func (d *jsonScan) integer(min, max int64) (int64, bool) {
	d.ws()
	start := d.i
	if d.i < len(d.b) && d.b[d.i] == '-' {
		d.i++
	}
	digits := d.i
	for d.i < len(d.b) && d.b[d.i] >= '0' && d.b[d.i] <= '9' {
		d.i++
	}
	n := d.i - digits
	if n == 0 || n > 18 || (n > 1 && d.b[digits] == '0') {
		return 0, false
	}
	if d.i < len(d.b) {
		switch d.b[d.i] {
		case '.', 'e', 'E':
			return 0, false
		}
	}
	v, err := strconv.ParseInt(string(d.b[start:d.i]), 10, 64)
	if err != nil || v < min || v > max {
		return 0, false
	}
	return v, true
}

func (d *jsonScan) int32Ptr() (*int32, bool) {
	v, ok := d.integer(-1<<31, 1<<31-1)
	if !ok {
		return nil, false
	}
	n := int32(v)
	return &n, true
}

func (d *jsonScan) strPtr() (*string, bool) {
	s, ok := d.str()
	return &s, ok
}

// isNull consumes a null literal if one is next.
func (d *jsonScan) isNull() bool {
	d.ws()
	if bytes.HasPrefix(d.b[d.i:], []byte("null")) {
		d.i += 4
		return true
	}
	return false
}

// parseTime reads a time as metav1.Time and MicroTime's UnmarshalJSON do:
// null is the zero time, a string is parsed with layout and made Local.
func (d *jsonScan) parseTime(layout string) (time.Time, bool) {
	if d.isNull() {
		return time.Time{}, true
	}
	s, ok := d.rawStr()
	if !ok {
		return time.Time{}, false
	}
	t, err := time.Parse(layout, string(s))
	if err != nil {
		return time.Time{}, false
	}
	return t.Local(), true
}

// microPtr reads an optional MicroTime: null leaves the pointer nil, as
// the serializer does for every pointer.
func (d *jsonScan) microPtr() (*metav1.MicroTime, bool) {
	if d.isNull() {
		return nil, true
	}
	t, ok := d.parseTime(metav1.RFC3339Micro)
	return &metav1.MicroTime{Time: t}, ok
}

// stringMap reads labels or annotations; a repeated key is left to the
// serializer, which reports it.
func (d *jsonScan) stringMap() (map[string]string, bool) {
	m := map[string]string{}
	ok := d.object(func(key []byte) bool {
		if _, dup := m[string(key)]; dup {
			return false
		}
		v, ok := d.str()
		m[string(key)] = v
		return ok
	})
	return m, ok
}

// leaseSpec reads a LeaseSpec. Nulls (nil pointers) are left to the
// serializer.
func (d *jsonScan) leaseSpec(s *coordinationv1.LeaseSpec) bool {
	var seen uint8
	return d.object(func(key []byte) bool {
		var bit uint8
		ok := false
		switch string(key) {
		case "holderIdentity":
			bit = 1
			s.HolderIdentity, ok = d.strPtr()
		case "leaseDurationSeconds":
			bit = 2
			s.LeaseDurationSeconds, ok = d.int32Ptr()
		case "acquireTime":
			bit = 4
			s.AcquireTime, ok = d.microPtr()
		case "renewTime":
			bit = 8
			s.RenewTime, ok = d.microPtr()
		case "leaseTransitions":
			bit = 16
			s.LeaseTransitions, ok = d.int32Ptr()
		case "strategy":
			bit = 32
			var v string
			v, ok = d.str()
			st := coordinationv1.CoordinatedLeaseStrategy(v)
			s.Strategy = &st
		case "preferredHolder":
			bit = 64
			s.PreferredHolder, ok = d.strPtr()
		}
		if !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
		return true
	})
}

// objectMeta reads ObjectMeta without ownerReferences.
func (d *jsonScan) objectMeta(m *metav1.ObjectMeta) bool {
	var seen uint16
	return d.object(func(key []byte) bool {
		var bit uint16
		ok := false
		switch string(key) {
		case "name":
			bit = 1 << 0
			m.Name, ok = d.str()
		case "generateName":
			bit = 1 << 1
			m.GenerateName, ok = d.str()
		case "namespace":
			bit = 1 << 2
			m.Namespace, ok = d.str()
		case "selfLink":
			bit = 1 << 3
			m.SelfLink, ok = d.str()
		case "uid":
			bit = 1 << 4
			var v string
			v, ok = d.str()
			m.UID = types.UID(v)
		case "resourceVersion":
			bit = 1 << 5
			m.ResourceVersion, ok = d.str()
		case "generation":
			bit = 1 << 6
			m.Generation, ok = d.integer(-1<<63+1, 1<<63-1)
		case "creationTimestamp":
			bit = 1 << 7
			var t time.Time
			t, ok = d.parseTime(time.RFC3339)
			m.CreationTimestamp = metav1.Time{Time: t}
		case "labels":
			bit = 1 << 8
			m.Labels, ok = d.stringMap()
		case "annotations":
			bit = 1 << 9
			m.Annotations, ok = d.stringMap()
		case "finalizers":
			bit = 1 << 10
			m.Finalizers = []string{}
			ok = d.array(func() bool {
				s, ok := d.str()
				m.Finalizers = append(m.Finalizers, s)
				return ok
			})
		case "managedFields":
			bit = 1 << 11
			m.ManagedFields = []metav1.ManagedFieldsEntry{}
			ok = d.array(func() bool {
				var e metav1.ManagedFieldsEntry
				if !d.managedEntry(&e) {
					return false
				}
				m.ManagedFields = append(m.ManagedFields, e)
				return true
			})
		}
		if !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
		return true
	})
}

func (d *jsonScan) managedEntry(e *metav1.ManagedFieldsEntry) bool {
	var seen uint8
	return d.object(func(key []byte) bool {
		var bit uint8
		ok := false
		switch string(key) {
		case "manager":
			bit = 1
			e.Manager, ok = d.str()
		case "operation":
			bit = 2
			var v string
			v, ok = d.str()
			e.Operation = metav1.ManagedFieldsOperationType(v)
		case "apiVersion":
			bit = 4
			e.APIVersion, ok = d.str()
		case "time":
			bit = 8
			if d.isNull() {
				e.Time, ok = nil, true
				break
			}
			var t time.Time
			t, ok = d.parseTime(time.RFC3339)
			e.Time = &metav1.Time{Time: t}
		case "fieldsType":
			bit = 16
			e.FieldsType, ok = d.str()
		case "fieldsV1":
			bit = 32
			start := d.skipWS()
			if ok = d.fieldsObject(0); ok {
				e.FieldsV1 = &metav1.FieldsV1{Raw: append([]byte(nil), d.b[start:d.i]...)}
			}
		case "subresource":
			bit = 64
			e.Subresource, ok = d.str()
		}
		if !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
		return true
	})
}

func (d *jsonScan) skipWS() int {
	d.ws()
	return d.i
}

// fieldsObject skips a FieldsV1 value: nested objects with plain string
// keys (the serializer keeps it as raw bytes, so duplicates are fine).
func (d *jsonScan) fieldsObject(depth int) bool {
	if depth > 64 {
		return false
	}
	return d.object(func([]byte) bool { return d.fieldsObject(depth + 1) })
}
