package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// TokenEntry is one line of a token file.
type TokenEntry struct {
	Token string
	User  User
}

// Tokens authenticates bearer tokens from a static token file.
type Tokens struct {
	entries []tokenEntry
}

type tokenEntry struct {
	sum  [sha256.Size]byte
	user User
}

// LoadTokenFile reads a token file in kube-apiserver's --token-auth-file
// format: CSV records of token, user name, uid and an optional quoted,
// comma-separated group list. Records with an empty token are skipped (as
// upstream does); fewer than three columns is an error. The entries are
// returned in file order.
func LoadTokenFile(path string) (*Tokens, []TokenEntry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("token auth file: %w", err)
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.FieldsPerRecord = -1
	r.TrimLeadingSpace = true
	var list []TokenEntry
	for n := 1; ; n++ {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("token auth file %s: %w", path, err)
		}
		if len(rec) < 3 {
			return nil, nil, fmt.Errorf("token auth file %s must have at least 3 columns (token, user name, user uid), found %d in record %d", path, len(rec), n)
		}
		if rec[0] == "" {
			continue
		}
		u := User{Name: rec[1], UID: rec[2]}
		if len(rec) >= 4 && rec[3] != "" {
			u.Groups = strings.Split(rec[3], ",")
		}
		list = append(list, TokenEntry{Token: rec[0], User: u})
	}
	return NewTokens(list), list, nil
}

// NewTokens builds an authenticator from entries. Only SHA-256 digests
// of the tokens are kept.
func NewTokens(list []TokenEntry) *Tokens {
	t := &Tokens{entries: make([]tokenEntry, len(list))}
	for i, e := range list {
		t.entries[i] = tokenEntry{sum: sha256.Sum256([]byte(e.Token)), user: e.User}
	}
	return t
}

// Len is the number of tokens.
func (t *Tokens) Len() int { return len(t.entries) }

// Authenticate returns the user of token. Every entry is compared, in
// constant time, so that the answer's timing reveals neither whether nor
// where a token matched; digests make the comparison length-independent.
// A token listed twice authenticates as its last entry, as upstream's map.
func (t *Tokens) Authenticate(token string) (User, bool) {
	sum := sha256.Sum256([]byte(token))
	match := -1
	for i := range t.entries {
		if subtle.ConstantTimeCompare(sum[:], t.entries[i].sum[:]) == 1 {
			match = i
		}
	}
	if match < 0 {
		return User{}, false
	}
	return t.entries[match].user, true
}
