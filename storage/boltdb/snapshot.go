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
}
