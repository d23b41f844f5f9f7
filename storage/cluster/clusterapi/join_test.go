package clusterapi

import (
	"strings"
	"testing"
	"time"
)

func validRequest() JoinRequest {
	return JoinRequest{Name: "m2", PeerURL: "https://10.0.0.2:2380", ClientURL: "https://10.0.0.2:2379",
		Hosts: []string{"10.0.0.2", "dev-2.lan"}, CSR: "-----BEGIN CERTIFICATE REQUEST-----\n...",
		Nonce: strings.Repeat("ab", NonceBytes), Proof: strings.Repeat("cd", 32)}
}

// TestJoinProof: the joiner's proof depends on the token, the session and
// every field of the request, the nonce and the CSR included, so a proof
// is worth one request on one session once; fields cannot be shifted into
// each other (each is length-prefixed); the proof itself is not covered.
func TestJoinProof(t *testing.T) {
	req := validRequest()
	base := JoinProof([]byte("token"), []byte("ekm"), &req)
	if len(base) != 64 || base != JoinProof([]byte("token"), []byte("ekm"), &req) {
		t.Fatalf("proof %q: want 64 hex digits, the same each time", base)
	}
	same := req
	same.Proof = "other"
	if JoinProof([]byte("token"), []byte("ekm"), &same) != base {
		t.Error("the proof covers itself")
	}
	changed := map[string]func(r *JoinRequest){
		"nonce":     func(r *JoinRequest) { r.Nonce = strings.Repeat("ef", NonceBytes) },
		"name":      func(r *JoinRequest) { r.Name = "m3" },
		"peerURL":   func(r *JoinRequest) { r.PeerURL = "https://10.0.0.3:2380" },
		"clientURL": func(r *JoinRequest) { r.ClientURL = "https://10.0.0.3:2379" },
		"hosts":     func(r *JoinRequest) { r.Hosts = r.Hosts[:1] },
		"hosts run": func(r *JoinRequest) { r.Hosts = []string{"10.0.0.2dev-2.lan"} },
		"replica":   func(r *JoinRequest) { r.Replica = true },
		"csr":       func(r *JoinRequest) { r.CSR += "x" },
		"shifted":   func(r *JoinRequest) { r.Name, r.PeerURL = r.Name+r.PeerURL[:1], r.PeerURL[1:] },
	}
	for what, change := range changed {
		r := req
		r.Hosts = append([]string(nil), req.Hosts...)
		change(&r)
		if JoinProof([]byte("token"), []byte("ekm"), &r) == base {
			t.Errorf("a different %s gives the same proof", what)
		}
	}
	if JoinProof([]byte("other"), []byte("ekm"), &req) == base {
		t.Error("another token gives the same proof")
	}
	if JoinProof([]byte("token"), nil, &req) == base {
		t.Error("another session (no TLS) gives the same proof")
	}
	// The member's proof is of another label: a joiner's proof never
	// passes for the member's, nor the reverse.
	resp := JoinResponse{CACert: "ca", Cert: "cert", ClientURLs: []string{"https://10.0.0.1:2379"}}
	mp := MemberProof([]byte("token"), []byte("ekm"), &req, &resp)
	if mp == base {
		t.Error("the member's proof equals the joiner's")
	}
	other := resp
	other.Cert = "another cert"
	if MemberProof([]byte("token"), []byte("ekm"), &req, &other) == mp {
		t.Error("the member's proof does not cover its answer")
	}
	r2 := req
	r2.Nonce = strings.Repeat("ef", NonceBytes)
	if MemberProof([]byte("token"), []byte("ekm"), &r2, &resp) == mp {
		t.Error("the member's proof does not cover the request's nonce")
	}
}

// TestValidate: every field is bounded and shaped before anything logs or
// uses it, and the error names the field without quoting its value.
func TestValidate(t *testing.T) {
	if r := validRequest(); r.Validate() != nil {
		t.Fatalf("a valid request: %v", r.Validate())
	}
	replica := JoinRequest{Name: "r1", Replica: true, CSR: "csr", Nonce: strings.Repeat("00", NonceBytes), Proof: strings.Repeat("00", 32)}
	if err := replica.Validate(); err != nil {
		t.Fatalf("a valid replica request: %v", err)
	}
	// Admission reads no nonce or proof (the HTTP side checked them), but
	// the rest the same.
	admission := JoinRequest{Name: "r1", Replica: true, CSR: "csr"}
	if err := admission.ValidateAdmission(); err != nil {
		t.Errorf("admission without the handshake's fields: %v", err)
	}
	if err := admission.Validate(); err == nil || !strings.Contains(err.Error(), "nonce ") {
		t.Errorf("a request without a nonce: %v, want an error naming the nonce", err)
	}
	admission.CSR = ""
	if err := admission.ValidateAdmission(); err == nil {
		t.Error("admission without a CSR is accepted")
	}
	long := strings.Repeat("x", 1<<20)
	for what, c := range map[string]struct {
		change func(r *JoinRequest)
		field  string
	}{
		"empty name":      {func(r *JoinRequest) { r.Name = "" }, "name"},
		"long name":       {func(r *JoinRequest) { r.Name = long }, "name"},
		"name with slash": {func(r *JoinRequest) { r.Name = "a/b" }, "name"},
		"no nonce":        {func(r *JoinRequest) { r.Nonce = "" }, "nonce"},
		"non-hex nonce":   {func(r *JoinRequest) { r.Nonce = strings.Repeat("zz", NonceBytes) }, "nonce"},
		"short proof":     {func(r *JoinRequest) { r.Proof = "abcd" }, "proof"},
		"no csr":          {func(r *JoinRequest) { r.CSR = "" }, "csr"},
		"huge csr":        {func(r *JoinRequest) { r.CSR = long }, "csr"},
		"http peer":       {func(r *JoinRequest) { r.PeerURL = "http://10.0.0.2:2380" }, "peerURL"},
		"no port":         {func(r *JoinRequest) { r.ClientURL = "https://10.0.0.2" }, "clientURL"},
		"long URL":        {func(r *JoinRequest) { r.PeerURL = "https://" + long + ":1" }, "peerURL"},
		"URL with path":   {func(r *JoinRequest) { r.PeerURL = "https://10.0.0.2:2380/x" }, "peerURL"},
		"many hosts":      {func(r *JoinRequest) { r.Hosts = make([]string, MaxHosts+1) }, "hosts"},
		"bad host":        {func(r *JoinRequest) { r.Hosts = []string{"a b"} }, "hosts"},
		"long host":       {func(r *JoinRequest) { r.Hosts = []string{long} }, "hosts"},
		"replica w/ URL":  {func(r *JoinRequest) { r.Replica = true }, "replica"},
	} {
		r := validRequest()
		c.change(&r)
		err := r.Validate()
		if err == nil || !strings.Contains(err.Error(), c.field+" ") {
			t.Errorf("%s: %v, want an error naming %s", what, err, c.field)
			continue
		}
		if len(err.Error()) > 300 {
			t.Errorf("%s: an error of %d bytes quotes the input", what, len(err.Error()))
		}
	}
}

// TestNonces: a nonce is accepted once, within its time to live; unknown
// ones never; and the pending ones are bounded, expired ones making room.
func TestNonces(t *testing.T) {
	now := time.Unix(1000, 0)
	n := NewNonces(30*time.Second, 3, func() time.Time { return now })
	a, err := n.Issue()
	if err != nil || len(a) != 2*NonceBytes {
		t.Fatalf("issue: %q, %v", a, err)
	}
	if !n.Consume(a) {
		t.Fatal("a fresh nonce is refused")
	}
	if n.Consume(a) {
		t.Error("a used nonce is accepted again")
	}
	if n.Consume(strings.Repeat("00", NonceBytes)) {
		t.Error("an unknown nonce is accepted")
	}
	b, _ := n.Issue()
	now = now.Add(31 * time.Second)
	if n.Consume(b) {
		t.Error("an expired nonce is accepted")
	}
	for range 3 {
		if _, err := n.Issue(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := n.Issue(); err != ErrTooManyNonces {
		t.Errorf("a fourth pending nonce: %v, want ErrTooManyNonces", err)
	}
	now = now.Add(31 * time.Second)
	if _, err := n.Issue(); err != nil {
		t.Errorf("expired nonces make no room: %v", err)
	}
	if n.Pending() != 1 {
		t.Errorf("%d nonces pending, want 1", n.Pending())
	}
}
