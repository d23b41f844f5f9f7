package boltdb

import (
	"encoding/binary"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/leasehold/leasehold/storage"
)

var (
	bucketKV   = []byte("kv")
	bucketMeta = []byte("meta")

	metaFormat   = []byte("format")
	metaRevision = []byte("revision")

	// formatV1 marks a leasehold store; a different marker (a future or
	// foreign format) stops Open rather than being misread.
	formatV1 = []byte("leasehold-bolt/v1")
)

// ErrFormat reports a file that is not a leasehold store (or is damaged).
var ErrFormat = errors.New("boltdb: not a leasehold store")

// recordHeader is create revision + mod revision.
const recordHeader = 16

// encodeRecord allocates one buffer holding header and value; the value part
// doubles as the in-memory copy, so a write costs a single allocation.
func encodeRecord(create, mod int64, value []byte) (rec, val []byte) {
	rec = make([]byte, recordHeader+len(value))
	binary.BigEndian.PutUint64(rec[0:8], uint64(create))
	binary.BigEndian.PutUint64(rec[8:16], uint64(mod))
	copy(rec[recordHeader:], value)
	return rec, rec[recordHeader:len(rec):len(rec)]
}

// decodeRecord parses a stored record. The returned value aliases rec.
func decodeRecord(key, rec []byte) (storage.KeyValue, error) {
	if len(rec) < recordHeader {
		return storage.KeyValue{}, fmt.Errorf("%w: record for key %q is %d bytes, shorter than its header", ErrFormat, key, len(rec))
	}
	kv := storage.KeyValue{
		Key:            string(key),
		CreateRevision: int64(binary.BigEndian.Uint64(rec[0:8])),
		ModRevision:    int64(binary.BigEndian.Uint64(rec[8:16])),
		Value:          rec[recordHeader:len(rec):len(rec)],
	}
	if kv.CreateRevision <= 0 || kv.ModRevision < kv.CreateRevision {
		return storage.KeyValue{}, fmt.Errorf("%w: record for key %q has revisions create=%d mod=%d", ErrFormat, key, kv.CreateRevision, kv.ModRevision)
	}
	return kv, nil
}

func encodeRevision(rev int64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, uint64(rev))
	return b
}

// initOrCheck creates the buckets of a brand-new file, or verifies the
// marker of an existing one. A file with any other content is refused.
func initOrCheck(tx *bolt.Tx) error {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		empty := true
		if err := tx.ForEach(func([]byte, *bolt.Bucket) error { empty = false; return nil }); err != nil {
			return err
		}
		if !empty {
			return fmt.Errorf("%w: bbolt file has buckets but no %q bucket", ErrFormat, bucketMeta)
		}
		var err error
		if meta, err = tx.CreateBucket(bucketMeta); err != nil {
			return err
		}
		if _, err = tx.CreateBucket(bucketKV); err != nil {
			return err
		}
		if err = meta.Put(metaFormat, formatV1); err != nil {
			return err
		}
		return meta.Put(metaRevision, encodeRevision(1))
	}
	return checkFormat(tx)
}

// checkFormat verifies the marker and shape of an existing store.
func checkFormat(tx *bolt.Tx) error {
	meta := tx.Bucket(bucketMeta)
	if f := meta.Get(metaFormat); string(f) != string(formatV1) {
		return fmt.Errorf("%w: format marker %q, want %q", ErrFormat, f, formatV1)
	}
	if r := meta.Get(metaRevision); len(r) != 8 {
		return fmt.Errorf("%w: revision record is %d bytes", ErrFormat, len(r))
	}
	if tx.Bucket(bucketKV) == nil {
		return fmt.Errorf("%w: missing %q bucket", ErrFormat, bucketKV)
	}
	return nil
}

func decodeRev(b []byte) uint64 { return binary.BigEndian.Uint64(b) }
