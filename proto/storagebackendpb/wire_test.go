package storagebackendpb_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/cairn-dev/cairn/proto/storagebackendpb"
)

// wire is Capact's storage_backend protocol as issue 5 gives it: message ->
// "number type name" per field, with "optional" for proto3 optional fields.
// A backend written for Capact only works with cairn while these match.
var wire = map[string][]string{
	"GetPreCreateValueRequest":               {"1 bytes context"},
	"GetPreCreateValueResponse":              {"1 optional bytes value"},
	"OnCreateRequest":                        {"1 string type_instance_id", "2 bytes context"},
	"OnCreateValueAndContextRequest":         {"1 string type_instance_id", "2 bytes value", "3 optional bytes context"},
	"OnCreateResponse":                       {"1 optional bytes context"},
	"TypeInstanceResourceVersion":            {"1 uint32 resource_version", "2 bytes value"},
	"OnUpdateValueAndContextRequest":         {"1 string type_instance_id", "2 uint32 new_resource_version", "3 bytes new_value", "4 optional bytes context", "5 optional string owner_id"},
	"OnUpdateRequest":                        {"1 string type_instance_id", "2 uint32 new_resource_version", "3 bytes context", "4 optional string owner_id"},
	"OnUpdateResponse":                       {"1 optional bytes context"},
	"OnDeleteValueAndContextRequest":         {"1 string type_instance_id", "2 optional bytes context", "3 optional string owner_id"},
	"OnDeleteRequest":                        {"1 string type_instance_id", "2 bytes context", "3 optional string owner_id"},
	"OnDeleteResponse":                       {},
	"OnDeleteRevisionRequest":                {"1 string type_instance_id", "3 optional string owner_id", "4 uint32 resource_version"},
	"OnDeleteRevisionValueAndContextRequest": {"1 string type_instance_id", "2 optional bytes context", "3 optional string owner_id", "4 uint32 resource_version"},
	"OnDeleteRevisionResponse":               {},
	"GetValueRequest":                        {"1 string type_instance_id", "2 uint32 resource_version", "3 bytes context"},
	"GetValueResponse":                       {"1 optional bytes value"},
	"GetLockedByRequest":                     {"1 string type_instance_id", "2 bytes context"},
	"GetLockedByResponse":                    {"1 optional string locked_by"},
	"OnLockRequest":                          {"1 string type_instance_id", "2 bytes context", "3 string locked_by"},
	"OnLockResponse":                         {},
	"OnUnlockRequest":                        {"1 string type_instance_id", "2 bytes context"},
	"OnUnlockResponse":                       {},
}

// services maps each service to "Method(Request) Response".
var services = map[string][]string{
	"ValueAndContextStorageBackend": {
		"GetValue(GetValueRequest) GetValueResponse",
		"OnCreate(OnCreateValueAndContextRequest) OnCreateResponse",
		"OnUpdate(OnUpdateValueAndContextRequest) OnUpdateResponse",
		"OnDelete(OnDeleteValueAndContextRequest) OnDeleteResponse",
		"OnDeleteRevision(OnDeleteRevisionValueAndContextRequest) OnDeleteRevisionResponse",
		"GetLockedBy(GetLockedByRequest) GetLockedByResponse",
		"OnLock(OnLockRequest) OnLockResponse",
		"OnUnlock(OnUnlockRequest) OnUnlockResponse",
	},
	"ContextStorageBackend": {
		"GetPreCreateValue(GetPreCreateValueRequest) GetPreCreateValueResponse",
		"GetValue(GetValueRequest) GetValueResponse",
		"OnCreate(OnCreateRequest) OnCreateResponse",
		"OnUpdate(OnUpdateRequest) OnUpdateResponse",
		"OnDelete(OnDeleteRequest) OnDeleteResponse",
		"OnDeleteRevision(OnDeleteRevisionRequest) OnDeleteRevisionResponse",
		"GetLockedBy(GetLockedByRequest) GetLockedByResponse",
		"OnLock(OnLockRequest) OnLockResponse",
		"OnUnlock(OnUnlockRequest) OnUnlockResponse",
	},
}

func TestWireProtocolMatchesCapact(t *testing.T) {
	fd := pb.File_storage_backend_proto
	if got := string(fd.Package()); got != "storage_backend" {
		t.Errorf("package = %q, want storage_backend", got)
	}
	if fd.Syntax() != protoreflect.Proto3 {
		t.Errorf("syntax = %v, want proto3", fd.Syntax())
	}

	msgs := fd.Messages()
	var names []string
	for i := range msgs.Len() {
		m := msgs.Get(i)
		names = append(names, string(m.Name()))
		want, ok := wire[string(m.Name())]
		if !ok {
			t.Errorf("message %s is not part of the protocol", m.Name())
			continue
		}
		var got []string
		for j := range m.Fields().Len() {
			f := m.Fields().Get(j)
			opt := ""
			if f.HasOptionalKeyword() {
				opt = "optional "
			}
			if f.Cardinality() == protoreflect.Repeated {
				opt = "repeated "
			}
			got = append(got, fmt.Sprintf("%d %s%s %s", f.Number(), opt, f.Kind(), f.Name()))
		}
		if !slices.Equal(got, want) {
			t.Errorf("message %s fields:\n got  %s\n want %s", m.Name(), strings.Join(got, "; "), strings.Join(want, "; "))
		}
	}
	for name := range wire {
		if !slices.Contains(names, name) {
			t.Errorf("message %s is missing", name)
		}
	}

	svcs := fd.Services()
	if svcs.Len() != len(services) {
		t.Errorf("%d services, want %d", svcs.Len(), len(services))
	}
	for name, want := range services {
		s := svcs.ByName(protoreflect.Name(name))
		if s == nil {
			t.Errorf("service %s is missing", name)
			continue
		}
		var got []string
		for i := range s.Methods().Len() {
			m := s.Methods().Get(i)
			if m.IsStreamingClient() || m.IsStreamingServer() {
				t.Errorf("%s.%s streams; the protocol is unary", name, m.Name())
			}
			got = append(got, fmt.Sprintf("%s(%s) %s", m.Name(), m.Input().Name(), m.Output().Name()))
		}
		if !slices.Equal(got, want) {
			t.Errorf("service %s methods:\n got  %v\n want %v", name, got, want)
		}
	}
	// The full service names are what travels on the wire in every call.
	if got := pb.ValueAndContextStorageBackend_ServiceDesc.ServiceName; got != "storage_backend.ValueAndContextStorageBackend" {
		t.Errorf("service name %q", got)
	}
	if got := pb.ContextStorageBackend_ServiceDesc.ServiceName; got != "storage_backend.ContextStorageBackend" {
		t.Errorf("service name %q", got)
	}
}
