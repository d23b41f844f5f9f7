package e2e

import (
	"strings"
	"testing"

	"k8s.io/client-go/discovery"
)

// TestE2EOpenAPIV2Protobuf: /openapi/v2 answers the protobuf form that
// client-go's discovery and kubectl's OpenAPI v2 paths ask for
// (application/com.github.proto-openapi.spec.v2@v1.0+protobuf), as
// kube-apiserver does; it used to answer 406.
func TestE2EOpenAPIV2Protobuf(t *testing.T) {
	t.Parallel()
	ts := startServer(t)

	dc, err := discovery.NewDiscoveryClientForConfig(restConfig(t, ts, wireJSON))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := dc.OpenAPISchema()
	if err != nil {
		t.Fatalf("client-go OpenAPISchema (protobuf): %v", err)
	}
	defined := map[string]bool{}
	for _, d := range doc.GetDefinitions().GetAdditionalProperties() {
		defined[d.GetName()] = true
	}
	for _, name := range []string{"io.k8s.api.coordination.v1.Lease", "io.k8s.api.coordination.v1beta1.LeaseCandidate"} {
		if !defined[name] {
			t.Errorf("OpenAPISchema: %s not defined (%d definitions)", name, len(defined))
		}
	}
	if doc.GetSwagger() != "2.0" || doc.GetPaths() == nil {
		t.Errorf("OpenAPISchema: swagger %q, paths %v", doc.GetSwagger(), doc.GetPaths() != nil)
	}

	// kubectl apply -f DIR/ with its default validation, creating and
	// then changing two leases (client-side apply computes a strategic
	// merge patch from the OpenAPI schema): exit 0 and nothing on stderr.
	k := newKubectl(t, ts)
	dir := t.TempDir()
	manifest := func(name, holder string) {
		writeFile(t, dir, name+".yaml", "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata:\n  name: "+name+
			"\n  namespace: default\nspec:\n  holderIdentity: "+holder+"\n  leaseDurationSeconds: 15\n")
	}
	manifest("proto-a", "device-1")
	manifest("proto-b", "device-1")
	for _, want := range []string{
		"lease.coordination.k8s.io/proto-a created\nlease.coordination.k8s.io/proto-b created\n",
		"lease.coordination.k8s.io/proto-a configured\nlease.coordination.k8s.io/proto-b unchanged\n",
	} {
		code, out, errOut := k.run("apply", "-f", dir+"/")
		if code != 0 || errOut != "" || out != want {
			t.Fatalf("kubectl apply -f %s/: exit %d\nstdout: %q (want %q)\nstderr: %q", dir, code, out, want, errOut)
		}
		manifest("proto-a", "device-2")
	}
	if got := k.ok("get", "lease", "proto-a", "-o", "jsonpath={.spec.holderIdentity}"); got != "device-2" {
		t.Errorf("after apply: holder %q, want device-2", got)
	}

	// kubectl explain's OpenAPI v2 output reads the protobuf document.
	code, out, errOut := k.run("explain", "lease.spec", "--output=plaintext-openapiv2")
	if code != 0 || errOut != "" || !strings.Contains(out, "holderIdentity") {
		t.Errorf("kubectl explain --output=plaintext-openapiv2: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
}
