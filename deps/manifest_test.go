package deps

import (
	"strings"
	"testing"
)

func TestParseDependencies(t *testing.T) {
	// The seed's example, as package stack hands it over (YAML as JSON).
	good := `{
	  "requires": [
	    {"name": "infra", "bundle": {"reference": "myinfra@0.1.0"},
	     "sharing": {"mode": "group", "group": {"name": "myapp"}},
	     "credentials": {"token": "${bundle.credentials.token}"},
	     "parameters": {"database": "myenvdb", "logLevel": "${bundle.parameters.logLevel}"}},
	    {"name": "app", "bundle": {"reference": "myapp:v1.2.3", "version": "1.x",
	       "interface": {"id": "https://example.com/if#app", "document": {"outputs": [{"name": "port", "$id": "urn:port"}]}}},
	     "credentials": {"db-connstr": "${bundle.dependencies.infra.outputs.mysql-connstr}"},
	     "outputs": {"endpoint": "https://${bundle.dependencies.infra.outputs.ip}:${outputs.port}/myapp"}},
	    {"name": "dns", "bundle": "example.com/dns-bundle:v1.2.3", "parameters": {"cname": "mysvc-a"}}
	  ],
	  "provides": {"interface": {"id": "https://example.com/if#shop"}}
	}`
	d, err := ParseDependencies([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Requires) != 3 || d.Requires[1].Bundle.Version != "1.x" || d.Requires[2].Bundle.Reference != "example.com/dns-bundle:v1.2.3" {
		t.Fatalf("parsed %+v", d)
	}
	if d.Provides.Interface.ID != "https://example.com/if#shop" {
		t.Fatalf("provides %+v", d.Provides)
	}
	if mode, group := d.Requires[0].effectiveSharing(); mode != SharingGroupMode || group != "myapp" {
		t.Fatalf("sharing %s %q", mode, group)
	}
	if mode, group := d.Requires[2].effectiveSharing(); mode != SharingGroupMode || group != "" {
		t.Fatalf("default sharing %s %q", mode, group)
	}

	bad := []struct{ name, doc, want string }{
		{"range", `{"requires":[{"name":"a","bundle":{"reference":"a@1.0.0"}},{"name":"b","bundle":{"reference":"b@1.0.0","version":"2.x.y"}}]}`,
			`dependencies.requires[1].bundle.version: "2.x.y" is not a semver range`},
		{"unknown field", `{"requires":[{"name":"a","bundle":{"reference":"a","interface":{"document":{"outputs":[{"nmae":"x"}]}}}}]}`,
			`dependencies.requires[0].bundle.interface.document.outputs[0]: unknown field "nmae"`},
		{"duplicate", `{"requires":[{"name":"a","bundle":"a"},{"name":"a","bundle":"b"}]}`,
			`dependencies.requires[1].name: "a" is already the name of dependencies.requires[0]`},
		{"bad name", `{"requires":[{"name":"a.b","bundle":"a"}]}`, `dependencies.requires[0].name: "a.b" is not a valid name`},
		{"no bundle", `{"requires":[{"name":"a","bundle":{}}]}`, `dependencies.requires[0].bundle: needs a reference, an interface, or both`},
		{"mode", `{"requires":[{"name":"a","bundle":"a","sharing":{"mode":"all"}}]}`, `dependencies.requires[0].sharing.mode: "all" is not one of none, group`},
		{"reference", `{"requires":[{"name":"a","bundle":{"reference":"Redis@x"}}]}`, `dependencies.requires[0].bundle.reference: "Redis@x" is not a stack reference`},
		{"range without reference", `{"requires":[{"name":"a","bundle":{"version":"1.x","interface":{"id":"x"}}}]}`, `dependencies.requires[0].bundle.version: a version range needs bundle.reference`},
		{"empty provides", `{"provides":{"interface":{"id":""}}}`, `dependencies.provides.interface.id: must not be empty`},
		{"list", `{"requires":{"name":"a"}}`, `dependencies.requires: must be a list`},
		{"number name", `{"requires":[{"name":"a","bundle":"a"},{"name":7,"bundle":"b"}]}`, `dependencies.requires[1].name: must be a string`},
		{"number version", `{"requires":[{"name":"a","bundle":{"reference":"a","version":2}}]}`, `dependencies.requires[0].bundle.version: must be a string`},
		{"credential mapping", `{"requires":[{"name":"a","bundle":"a","credentials":{"k":{"from":"x"}}}]}`, `dependencies.requires[0].credentials.k: must be a string`},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseDependencies([]byte(tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestParseCredentials(t *testing.T) {
	cs, err := ParseCredentials([]byte(`[{"name":"kubeconfig","$id":"https://getporter.org/interfaces#kubernetes.config.cluster-admin","type":"cap.type.kubeconfig"},{"name":"token","required":false}]`))
	if err != nil {
		t.Fatal(err)
	}
	if !cs[0].IsRequired() || cs[1].IsRequired() || cs[0].ID == "" {
		t.Fatalf("%+v", cs)
	}
	if _, err := ParseCredentials([]byte(`[{"name":"a"},{"name":"a"}]`)); err == nil || !strings.Contains(err.Error(), `credentials[1].name: "a" is declared twice`) {
		t.Fatalf("duplicate: %v", err)
	}
	if _, err := ParseCredentials([]byte(`[{"name":"a","value":"x"}]`)); err == nil || !strings.Contains(err.Error(), `credentials[0]: unknown field "value"`) {
		t.Fatalf("unknown field: %v", err)
	}
}

func TestParseReferenceAndOverride(t *testing.T) {
	for in, want := range map[string]Reference{
		"redis":                  {Name: "redis"},
		"redis@1.2.0":            {Name: "redis", Version: "1.2.0"},
		"getporter/redis:v1.0.2": {Name: "getporter/redis", Version: "1.0.2"},
		"example.com/dns:v1.2.3": {Name: "example.com/dns", Version: "1.2.3"},
	} {
		got, err := ParseReference(in)
		if err != nil || got != want {
			t.Errorf("ParseReference(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "Redis", "redis@", "redis@latest", "a//b"} {
		if _, err := ParseReference(in); err == nil {
			t.Errorf("ParseReference(%q) accepted", in)
		}
	}
	o, err := ParseOverride("web.db=Postgres/shared-pg")
	if err != nil || o.Path != "web.db" || o.Installation == nil || o.Installation.Kind != "Postgres" || o.Installation.Name != "shared-pg" {
		t.Fatalf("%+v %v", o, err)
	}
	o, err = ParseOverride("db=postgres@2.3.4")
	if err != nil || o.Stack == nil || o.Stack.String() != "postgres@2.3.4" {
		t.Fatalf("%+v %v", o, err)
	}
	o, err = ParseOverride("db=global/Postgres/shared-pg")
	if err != nil || o.Installation == nil || *o.Installation != (InstallationRef{Kind: "Postgres", Namespace: "global", Name: "shared-pg"}) || o.Installation.String() != "global/Postgres/shared-pg" {
		t.Fatalf("%+v %v", o, err)
	}
	for _, in := range []string{"db", "=x/y", "db=", "db=a/b/c/d", "db=/a/b", "db=a//b", "db=Dev/a/b", "d..b=a/b"} {
		if _, err := ParseOverride(in); err == nil {
			t.Errorf("ParseOverride(%q) accepted", in)
		}
	}
}
