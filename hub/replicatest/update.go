package replicatest

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/hub"
)

// testUpdateAnswerAsStored: the instance an update answers with, which the
// hub assembles from what its transaction wrote, is the one a read of the
// store gives right after (through another replica's store handle), for
// updates of each part an update writes, one after another from several
// replicas.
func testUpdateAnswerAsStored(t *testing.T, db Database) {
	hubs := startReplicas(t, db, replicas)
	reader := db.Open(t)
	id := createOne(t, hubs[0], "answer", json.RawMessage(`{"n":0}`))
	attrs := []cairn.AttributeRef{{Path: "cap.attribute.a", Revision: "0.1.0"}}
	steps := []hub.UpdateInstance{
		{Value: json.RawMessage(`{"n": 1}`)},
		{Labels: map[string]string{"team": "a"}, Annotations: map[string]string{"note": "x"}},
		{Value: json.RawMessage(`{"n":2}`), Labels: map[string]string{}, Annotations: map[string]string{}},
		{ManagedFields: json.RawMessage(`[ {"manager": "m", "operation": "Update"} ]`), Attributes: &attrs},
		{Value: json.RawMessage(`{"n":3}`), Attributes: &[]cairn.AttributeRef{}, CreatedBy: "someone"},
		{Value: json.RawMessage(`{"n":4}`)},
	}
	for i, up := range steps {
		up.ID = id
		out, err := hubs[i%replicas].UpdateInstances(ctx(), []hub.UpdateInstance{up})
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		got := out[0]
		got.Latest.Value = nil
		stored, err := reader.GetInstancesBrief(ctx(), []string{id})
		if err != nil || len(stored) != 1 {
			t.Fatalf("step %d: read back: %v %v", i, stored, err)
		}
		if !reflect.DeepEqual(got, stored[0]) {
			t.Fatalf("step %d: the update answered\n%+v\nthe store holds\n%+v", i, got, stored[0])
		}
	}
}
