package leasecodec

import (
	"strconv"
	"time"
	"unsafe"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/leasehold/leasehold/storage"
)

// The LIST fast path: a LeaseList rendered straight from the stored
// protobuf values. Each value is read into one reused
// Lease whose strings point into the value (which the store never
// modifies), so a list of 10,000 leases allocates no objects, and the
// Lease is then written by appendLeaseJSON like any other. Anything the
// reader does not reproduce exactly as the generated Unmarshal would
// (unknown or repeated fields, ownerReferences, malformed input) makes it
// fall back to Unmarshal for that item. TestLeaseReader and
// FuzzLeaseReader compare it with Unmarshal.

// StoredListJSON renders a LeaseList body from stored values (the
// protobuf encoding without resourceVersion, which is ModRevision); ok
// false means decode the items and use the serializer.
func StoredListJSON(meta *metav1.ListMeta, items []storage.KeyValue) ([]byte, bool) {
	size := 256
	for i := range items {
		size += len(items[i].Value)*2 + 64 // JSON is about 1.8 times the protobuf
	}
	w := jsonOut{b: make([]byte, 0, size), ok: true, first: true}
	w.raw(`{"kind":"LeaseList","apiVersion":"coordination.k8s.io/v1","metadata":{`)
	w.listMeta(meta)
	w.raw(`},"items":[`)
	if !w.ok {
		return nil, false
	}
	var rd leaseReader
	for i := range items {
		if i > 0 {
			w.b = append(w.b, ',')
		}
		l, ok := rd.lease(items[i].Value, items[i].ModRevision)
		if !ok {
			return nil, false
		}
		if w.b, ok = appendLeaseJSONMemo(w.b, l, false, &w.fieldsOK); !ok {
			return nil, false
		}
	}
	w.raw("]}\n")
	return w.b, true
}

// listMeta writes ListMeta's members.
func (w *jsonOut) listMeta(m *metav1.ListMeta) {
	w.field(`"selfLink":`, m.SelfLink, true)
	w.field(`"resourceVersion":`, m.ResourceVersion, true)
	w.field(`"continue":`, m.Continue, true)
	if m.RemainingItemCount != nil {
		w.sep()
		w.raw(`"remainingItemCount":`)
		w.b = strconv.AppendInt(w.b, *m.RemainingItemCount, 10)
	}
}

// leaseReader reads stored Leases into reused memory.
type leaseReader struct {
	l           coordinationv1.Lease
	labels      map[string]string
	annotations map[string]string
	finalizers  []string
	managed     []metav1.ManagedFieldsEntry
	times       []metav1.Time
	fields      []metav1.FieldsV1
	timeAt      []int // per managed entry: 1 + index in times, 0 for none
	fieldsAt    []int // likewise in fields
	deletion    metav1.Time
	grace       int64
	holder      string
	strategy    coordinationv1.CoordinatedLeaseStrategy
	preferred   string
	duration    int32
	transitions int32
	acquire     metav1.MicroTime
	renew       metav1.MicroTime
	rv          []byte
}

// protobuf wire types.
const (
	wireVarint = 0
	wireBytes  = 2
)

// pbReader walks the fields of one protobuf message.
type pbReader struct {
	b   []byte
	bad bool
}

// next returns the next field: its number, wire type, varint value or
// bytes. ok is false at the end or on malformed input (then r.bad).
func (r *pbReader) next() (num int, wire int, v uint64, data []byte, ok bool) {
	if len(r.b) == 0 {
		return 0, 0, 0, nil, false
	}
	key, n := uvarint(r.b)
	if n <= 0 || key>>3 == 0 || key>>3 > 1<<29 {
		r.bad = true
		return 0, 0, 0, nil, false
	}
	r.b = r.b[n:]
	num, wire = int(key>>3), int(key&7)
	switch wire {
	case wireVarint:
		v, n = uvarint(r.b)
		if n <= 0 {
			r.bad = true
			return 0, 0, 0, nil, false
		}
		r.b = r.b[n:]
	case wireBytes:
		l, n := uvarint(r.b)
		if n <= 0 || l > uint64(len(r.b)-n) {
			r.bad = true
			return 0, 0, 0, nil, false
		}
		data = r.b[n : n+int(l)]
		r.b = r.b[n+int(l):]
	default:
		r.bad = true // no other wire type occurs in a Lease
		return 0, 0, 0, nil, false
	}
	return num, wire, v, data, true
}

// uvarint is binary.Uvarint, rejecting over-long encodings as the
// generated code does (more than 10 bytes, or overflow).
func uvarint(b []byte) (uint64, int) {
	var x uint64
	var s uint
	for i, c := range b {
		if i == 10 {
			return 0, -1
		}
		if c < 0x80 {
			if i == 9 && c > 1 {
				return 0, -1
			}
			return x | uint64(c)<<s, i + 1
		}
		x |= uint64(c&0x7f) << s
		s += 7
	}
	return 0, 0
}

// str is a string sharing b's memory: the store's values are immutable.
func str(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// seen tracks the non-repeated fields already read (1..31): a repeated
// occurrence is merged or overwritten by Unmarshal; the reader leaves
// such input to it.
type seen uint32

func (s *seen) first(num int) bool {
	if num >= 32 {
		return false
	}
	bit := seen(1) << num
	if *s&bit != 0 {
		return false
	}
	*s |= bit
	return true
}

// lease returns the lease stored as value at modRevision: read's, or the
// generated Unmarshal's when read declines it; ok false if the value does
// not decode at all.
func (d *leaseReader) lease(value []byte, modRevision int64) (*coordinationv1.Lease, bool) {
	if l, ok := d.read(value, modRevision); ok {
		return l, true
	}
	l := &coordinationv1.Lease{}
	if err := l.Unmarshal(value); err != nil {
		return nil, false
	}
	l.ResourceVersion = strconv.FormatInt(modRevision, 10)
	return l, true
}

// read returns the Lease stored in value, or ok false.
func (d *leaseReader) read(value []byte, modRevision int64) (*coordinationv1.Lease, bool) {
	d.l = coordinationv1.Lease{}
	clear(d.labels)
	clear(d.annotations)
	d.finalizers, d.managed, d.times, d.fields = d.finalizers[:0], d.managed[:0], d.times[:0], d.fields[:0]
	d.timeAt, d.fieldsAt = d.timeAt[:0], d.fieldsAt[:0]
	r := pbReader{b: value}
	var s seen
	for {
		num, wire, _, data, ok := r.next()
		if !ok {
			break
		}
		if wire != wireBytes || !s.first(num) {
			return nil, false
		}
		switch num {
		case 1:
			ok = d.meta(data)
		case 2:
			ok = d.spec(data)
		default:
			ok = false
		}
		if !ok {
			return nil, false
		}
	}
	if r.bad {
		return nil, false
	}
	// Pointers into the reused slices are taken once they stop growing.
	m := &d.l.ObjectMeta
	if len(d.labels) > 0 {
		m.Labels = d.labels
	}
	if len(d.annotations) > 0 {
		m.Annotations = d.annotations
	}
	if len(d.finalizers) > 0 {
		m.Finalizers = d.finalizers
	}
	if len(d.managed) > 0 {
		for i := range d.managed {
			e := &d.managed[i]
			if t := d.timeAt[i]; t > 0 {
				e.Time = &d.times[t-1]
			}
			if f := d.fieldsAt[i]; f > 0 {
				e.FieldsV1 = &d.fields[f-1]
			}
		}
		m.ManagedFields = d.managed
	}
	if m.ResourceVersion != "" {
		return nil, false // never stored: leave the oddity to Unmarshal
	}
	d.rv = strconv.AppendInt(d.rv[:0], modRevision, 10)
	m.ResourceVersion = str(d.rv)
	return &d.l, true
}

func readTime(data []byte, micro bool) (time.Time, bool) {
	if len(data) == 0 {
		return time.Time{}, true
	}
	r := pbReader{b: data}
	var sec, nsec uint64
	var s seen
	for {
		num, wire, v, _, ok := r.next()
		if !ok {
			break
		}
		if wire != wireVarint || !s.first(num) {
			return time.Time{}, false
		}
		switch num {
		case 1:
			sec = v
		case 2:
			nsec = v
		default:
			return time.Time{}, false
		}
	}
	if r.bad {
		return time.Time{}, false
	}
	if !micro {
		return time.Unix(int64(sec), 0).Local(), true
	}
	ns := time.Duration(int32(nsec)).Truncate(time.Microsecond)
	return time.Unix(int64(sec), int64(ns)).Local(), true
}

func (d *leaseReader) meta(b []byte) bool {
	m := &d.l.ObjectMeta
	r := pbReader{b: b}
	var s seen
	for {
		num, wire, v, data, ok := r.next()
		if !ok {
			break
		}
		repeated := num == 11 || num == 12 || num == 14 || num == 17
		if !repeated && !s.first(num) {
			return false
		}
		if (num == 7 || num == 10) != (wire == wireVarint) || (wire != wireVarint && wire != wireBytes) {
			return false
		}
		switch num {
		case 1:
			m.Name = str(data)
		case 2:
			m.GenerateName = str(data)
		case 3:
			m.Namespace = str(data)
		case 4:
			m.SelfLink = str(data)
		case 5:
			m.UID = types.UID(str(data))
		case 6:
			m.ResourceVersion = str(data)
		case 7:
			m.Generation = int64(v)
		case 8:
			t, ok := readTime(data, false)
			if !ok {
				return false
			}
			m.CreationTimestamp = metav1.Time{Time: t}
		case 9:
			t, ok := readTime(data, false)
			if !ok {
				return false
			}
			d.deletion = metav1.Time{Time: t}
			m.DeletionTimestamp = &d.deletion
		case 10:
			d.grace = int64(v)
			m.DeletionGracePeriodSeconds = &d.grace
		case 11, 12:
			k, val, ok := readEntry(data)
			if !ok {
				return false
			}
			mp := &d.labels
			if num == 12 {
				mp = &d.annotations
			}
			if *mp == nil {
				*mp = map[string]string{}
			}
			if _, dup := (*mp)[k]; dup {
				return false
			}
			(*mp)[k] = val
		case 14:
			d.finalizers = append(d.finalizers, str(data))
		case 17:
			if !d.managedEntry(data) {
				return false
			}
		default: // ownerReferences (13) and anything unknown
			return false
		}
	}
	return !r.bad
}

func readEntry(b []byte) (k, v string, ok bool) {
	r := pbReader{b: b}
	var s seen
	for {
		num, wire, _, data, ok := r.next()
		if !ok {
			break
		}
		if wire != wireBytes || !s.first(num) {
			return "", "", false
		}
		switch num {
		case 1:
			k = str(data)
		case 2:
			v = str(data)
		default:
			return "", "", false
		}
	}
	return k, v, !r.bad
}

func (d *leaseReader) managedEntry(b []byte) bool {
	var e metav1.ManagedFieldsEntry
	// Time and FieldsV1 point into d.times and d.fields, which may still
	// grow: read sets the pointers from these 1-based indexes at the end.
	timeAt, fieldsAt := 0, 0
	r := pbReader{b: b}
	var s seen
	for {
		num, wire, _, data, ok := r.next()
		if !ok {
			break
		}
		if wire != wireBytes || !s.first(num) {
			return false
		}
		switch num {
		case 1:
			e.Manager = str(data)
		case 2:
			e.Operation = metav1.ManagedFieldsOperationType(str(data))
		case 3:
			e.APIVersion = str(data)
		case 4:
			t, ok := readTime(data, false)
			if !ok {
				return false
			}
			d.times = append(d.times, metav1.Time{Time: t})
			timeAt = len(d.times)
		case 6:
			e.FieldsType = str(data)
		case 7:
			var raw []byte
			fr := pbReader{b: data}
			var fs seen
			for {
				fnum, fwire, _, fdata, ok := fr.next()
				if !ok {
					break
				}
				if fnum != 1 || fwire != wireBytes || !fs.first(fnum) {
					return false
				}
				raw = fdata
			}
			if fr.bad {
				return false
			}
			d.fields = append(d.fields, metav1.FieldsV1{Raw: raw})
			fieldsAt = len(d.fields)
		case 8:
			e.Subresource = str(data)
		default:
			return false
		}
	}
	if r.bad {
		return false
	}
	d.managed = append(d.managed, e)
	d.timeAt = append(d.timeAt, timeAt)
	d.fieldsAt = append(d.fieldsAt, fieldsAt)
	return true
}

func (d *leaseReader) spec(b []byte) bool {
	sp := &d.l.Spec
	r := pbReader{b: b}
	var s seen
	for {
		num, wire, v, data, ok := r.next()
		if !ok {
			break
		}
		if !s.first(num) || (num == 2 || num == 5) != (wire == wireVarint) || (wire != wireVarint && wire != wireBytes) {
			return false
		}
		switch num {
		case 1:
			d.holder = str(data)
			sp.HolderIdentity = &d.holder
		case 2:
			d.duration = int32(v)
			sp.LeaseDurationSeconds = &d.duration
		case 3, 4:
			t, ok := readTime(data, true)
			if !ok {
				return false
			}
			if num == 3 {
				d.acquire = metav1.MicroTime{Time: t}
				sp.AcquireTime = &d.acquire
			} else {
				d.renew = metav1.MicroTime{Time: t}
				sp.RenewTime = &d.renew
			}
		case 5:
			d.transitions = int32(v)
			sp.LeaseTransitions = &d.transitions
		case 6:
			d.strategy = coordinationv1.CoordinatedLeaseStrategy(str(data))
			sp.Strategy = &d.strategy
		case 7:
			d.preferred = str(data)
			sp.PreferredHolder = &d.preferred
		default:
			return false
		}
	}
	return !r.bad
}
