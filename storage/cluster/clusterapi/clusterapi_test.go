package clusterapi

import (
	"encoding/json"
	"testing"
)

// TestStatusWire pins GET /leasehold/v1/cluster's bytes: the member writes
// and "leasehold cluster" reads this one type, and older clients read the
// same keys in the same order.
func TestStatusWire(t *testing.T) {
	st := Status{Self: "m1", Leader: "m2", Members: []Member{{Name: "m1", ID: "8e9e05c52164694d",
		PeerURLs: []string{"https://10.0.0.1:2380"}, ClientURLs: []string{"https://10.0.0.1:2379"},
		Healthy: true, RaftIndex: 12, RaftTerm: 3, DBSize: 20480}},
		ElectionController: "m2", ElectionControllerID: "m2/41/ab12"}
	got, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"self":"m1","leader":"m2","members":[{"name":"m1","id":"8e9e05c52164694d",` +
		`"peerURLs":["https://10.0.0.1:2380"],"clientURLs":["https://10.0.0.1:2379"],"learner":false,` +
		`"leader":false,"healthy":true,"raftIndex":12,"raftTerm":3,"dbSizeBytes":20480}],` +
		`"electionController":"m2","electionControllerID":"m2/41/ab12"}`
	if string(got) != want {
		t.Errorf("status:\n%s\nwant:\n%s", got, want)
	}
	// No election controller: the name stays (empty), the identity goes.
	got, _ = json.Marshal(Status{Self: "m1"})
	if string(got) != `{"self":"m1","leader":"","members":null,"electionController":""}` {
		t.Errorf("status without a controller: %s", got)
	}
}
