package leasecodec

// StoredLeaseCoordination reads, from a stored Lease without decoding it,
// its namespace and name and whether its spec sets a strategy or a
// preferred holder (non-empty): what the election controller needs to
// tell the few leases coordinated election concerns from the plain ones
// at start, when it lists every lease. The strings share value's memory
// (the store never modifies it): use them, do not keep them. ok is false
// when the value is not read with certainty (malformed, or metadata,
// spec, name, namespace, strategy or preferredHolder occurring twice,
// which Unmarshal would merge or overwrite, or with another wire type):
// then decode it.
func StoredLeaseCoordination(value []byte) (namespace, name string, coordinated, ok bool) {
	r := pbReader{b: value}
	var top seen
	for {
		num, wire, _, data, more := r.next()
		if !more {
			break
		}
		if num != 1 && num != 2 {
			continue
		}
		if wire != wireBytes || !top.first(num) {
			return "", "", false, false
		}
		var fields seen
		inner := pbReader{b: data}
		for {
			n, w, _, d, more := inner.next()
			if !more {
				break
			}
			if !(num == 1 && (n == 1 || n == 3) || num == 2 && (n == 6 || n == 7)) {
				continue
			}
			if w != wireBytes || !fields.first(n) {
				return "", "", false, false
			}
			switch {
			case num == 1 && n == 1:
				name = str(d)
			case num == 1 && n == 3:
				namespace = str(d)
			case len(d) > 0:
				coordinated = true
			}
		}
		if inner.bad {
			return "", "", false, false
		}
	}
	if r.bad {
		return "", "", false, false
	}
	return namespace, name, coordinated, true
}
