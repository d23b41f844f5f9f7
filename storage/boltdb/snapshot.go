package boltdb

// snapshot is the store's state after one committed round: the index of
// every key, the revisions and the retained history. A published
// snapshot is immutable; the writer builds the next one beside it (the
// index by path copying, the history by appending past the end that
// older snapshots see) and swaps the pointer. A List or Get loads the
// pointer once and reads a consistent revision for as long as it likes,
// holding nothing the writer needs: the RWMutex this replaces let one
// slow LIST hold up a commit, and Go's RWMutex then queued every new
// reader, renewals' GETs included, behind that waiting writer.
type snapshot struct {
	index      *inode
	rev        int64
	compactRev int64
	hist       history
	// data is what the quota counts of the index (see dataSize).
	data dataSize
}

// dataSize is what the quota (Options.QuotaBytes) counts: the bytes of
// the keys and values in the index, and separately those of the large
// values (over LargeValueBytes) among them. Slots and tree nodes add
// about a hundred bytes per key that it does not count.
type dataSize struct {
	total, large int64
}

// kvBytes is what one stored key and value count.
func kvBytes(key string, value []byte) int64 { return int64(len(key) + len(value)) }

// add counts a key-value put (n > 0) or removed (n < 0).
func (d *dataSize) add(key string, value []byte, sign int64) {
	n := sign * kvBytes(key, value)
	d.total += n
	if len(value) > LargeValueBytes {
		d.large += n
	}
}
