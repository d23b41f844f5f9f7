package status

import (
	"reflect"
	"testing"

	"github.com/leasehold/leasehold/plugins/abi"
)

// TestDeprecatedCopyMatches: plugins/abi keeps a deprecated copy of
// Module (abi.ModuleStatus) for one ABI minor revision, for authors who
// decode the UI's modules list with it. Until it is removed the two must
// agree field by field, with the same JSON, and the same state values.
func TestDeprecatedCopyMatches(t *testing.T) {
	ours, theirs := reflect.TypeFor[Module](), reflect.TypeFor[abi.ModuleStatus]()
	if ours.NumField() != theirs.NumField() {
		t.Fatalf("status.Module has %d fields, abi.ModuleStatus %d", ours.NumField(), theirs.NumField())
	}
	for i := range ours.NumField() {
		a, b := ours.Field(i), theirs.Field(i)
		if a.Name != b.Name || a.Type != b.Type || a.Tag != b.Tag {
			t.Errorf("field %d: status.Module has %s %s %q, abi.ModuleStatus %s %s %q", i, a.Name, a.Type, a.Tag, b.Name, b.Type, b.Tag)
		}
	}
	if StateLoaded != abi.StateLoaded || StateRefusedPrefix != abi.StateRefusedPrefix {
		t.Errorf("states differ from abi's deprecated ones")
	}
	// Converting proves the same underlying type to the compiler too.
	_ = abi.ModuleStatus(Module{})
}
