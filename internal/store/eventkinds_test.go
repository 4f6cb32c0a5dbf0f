package store

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestEventKindWire: event kinds keep the strings clients and the event
// log already hold (api.Event.Type, SSE's event: field).
func TestEventKindWire(t *testing.T) {
	for k, want := range map[EventKind]string{
		EventConfigSeeded:                  "ConfigSeeded",
		EventWorkloadSubmitted:             "WorkloadSubmitted",
		EventNodeLost:                      "NodeLost",
		EventReservationResized:            "ReservationResized",
		EventReservationBound:              "ReservationBound",
		WorkloadStateEvent(StateFailed):    "WorkloadFailed",
		WorkloadStateEvent(StateSucceeded): "WorkloadSucceeded",
		AlertEvent("Fired"):                "AlertFired",
	} {
		if k.String() != want {
			t.Errorf("kind %q, want %q", k, want)
		}
	}
	e := &Event{Type: "NodeLost"}
	if !e.Is(EventNodeLost) || e.Is(EventNodeRecovered) {
		t.Error("Event.Is")
	}
}

// TestParseObject: an event's object names a stored object by kind and
// key, or none.
func TestParseObject(t *testing.T) {
	cases := []struct {
		obj  string
		kind Kind
		key  string
		ok   bool
	}{
		{WorkloadObject("acme/train"), KindWorkload, "acme/train", true},
		{NodeObject("eus-a-n0000"), KindNode, "eus-a-n0000", true},
		{TenantObject("acme"), KindTenant, "acme", true},
		{ReservationObject("acme/r1"), KindReservation, "acme/r1", true},
		{PartitionObject("p"), KindPartition, "p", true},
		{PolicyObject("sla"), KindPolicy, "sla", true},
		{ConfigObject, "", "", false},
		{AlertsObject, "", "", false},
		{ProbesObject, "", "", false},
		{AlertObject("gpu-full"), "", "", false},
		{"workloads/", "", "", false},
		{"bogus/x", "", "", false},
		{"", "", "", false},
	}
	for _, c := range cases {
		k, key, ok := ParseObject(c.obj)
		if k != c.kind || key != c.key || ok != c.ok {
			t.Errorf("ParseObject(%q) = %q %q %v, want %q %q %v", c.obj, k, key, ok, c.kind, c.key, c.ok)
		}
	}
	if WorkloadObject("acme/j") != "workloads/acme/j" || NodeObject("n1") != "nodes/n1" || AlertObject("r") != "alerts/r" {
		t.Error("object strings changed")
	}
}

// TestEventTypeIsKind: Event.Type is an EventKind, so a writer hands it
// a kind (no .String(), no hand-built string) and a reader compares kinds,
// while the stored JSON keeps the plain string. It does not compile where
// the field is a string.
func TestEventTypeIsKind(t *testing.T) {
	var kind EventKind = EventWorkloadPlaced
	e := Event{Seq: 7, Type: kind, Object: WorkloadObject("acme/j")}
	b, err := json.Marshal(&e)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"type":"WorkloadPlaced"`) {
		t.Fatalf("JSON changed: %s", b)
	}
	var back Event
	if err := json.Unmarshal([]byte(`{"seq":7,"type":"WorkloadFailed","object":"workloads/acme/j"}`), &back); err != nil {
		t.Fatal(err)
	}
	if back.Type != WorkloadStateEvent(StateFailed) || !back.Is(WorkloadStateEvent(StateFailed)) {
		t.Fatalf("decoded type %q", back.Type)
	}
	if got := reflect.TypeOf(Event{}.Type); got != reflect.TypeOf(kind) {
		t.Fatalf("Event.Type is %v, want EventKind", got)
	}
}
