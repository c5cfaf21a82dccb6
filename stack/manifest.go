package stack

import (
	"encoding/json"

	"sigs.k8s.io/kustomize/api/types"

	"github.com/cairn-dev/cairn/expr"
)

// ManifestFile is the name of the manifest at the root of a stack package.
const ManifestFile = "stack.yaml"

// Manifest is stack.yaml: what the stack is, the installation kind it
// defines, and how its rendered resources are wired, checked and deleted.
type Manifest struct {
	Name        string `json:"name"`
	Version     string `json:"version"` // semantic version, MAJOR.MINOR.PATCH[-pre][+build]
	Description string `json:"description,omitempty"`
	// Kind is the installation kind: the high-level Type a user creates one
	// instance of to get a whole environment (seed 004's MinimalGCP).
	Kind InstallationKind `json:"kind"`
	// Configurations are seed 004's "different sets of configurations in
	// one stack": a spec field of the installation chooses which kustomize
	// directory under resources/ is rendered. Nil: resources/ itself.
	Configurations *Configurations `json:"configurations,omitempty"`
	// Vars make values of the installation available to the resources as
	// seed 004's $(NAME), through kustomize vars whose objref is the
	// installation object.
	Vars []Var `json:"vars,omitempty"`
	// Replacements are kustomize replacements added to the generated
	// overlay, so their source may be the installation object (select it by
	// the installation kind; its name is not known to the author).
	Replacements []types.Replacement `json:"replacements,omitempty"`
	Outputs      []Output            `json:"outputs,omitempty"`
	Readiness    []ReadinessCheck    `json:"readiness,omitempty"`
	// DeletionPriorities order the deletion of the children: higher
	// priorities are deleted first; unmatched children have priority 0.
	DeletionPriorities []DeletionPriority `json:"deletionPriorities,omitempty"`
	// Credentials and Dependencies are kept verbatim (as JSON); the
	// dependency resolver parses them (seed 002).
	Credentials  json.RawMessage `json:"credentials,omitempty"`
	Dependencies json.RawMessage `json:"dependencies,omitempty"`
}

// Scope says whether installations live in a namespace.
type Scope string

const (
	Namespaced Scope = "Namespaced"
	Cluster    Scope = "Cluster"
)

// InstallationKind is the Type a stack defines: REST names and parameters.
type InstallationKind struct {
	Group   string `json:"group"`
	Version string `json:"version"` // a Kubernetes API version: v1, v1alpha1, v2beta3
	Names   Names  `json:"names"`
	// Scope defaults to Namespaced; a Cluster kind's installations have no
	// namespace (cairn.ScopeCluster).
	Scope Scope `json:"scope,omitempty"`
	// Parameters is the JSON Schema of the installation's spec; it must be
	// of type object. Absent, it is {"type": "object"}.
	Parameters               json.RawMessage `json:"parameters,omitempty"`
	AdditionalPrinterColumns []PrinterColumn `json:"additionalPrinterColumns,omitempty"`
}

// APIVersion is group/version, the apiVersion of installations.
func (k InstallationKind) APIVersion() string { return k.Group + "/" + k.Version }

// Names are the REST names of the installation kind. Singular defaults to
// the kind in lower case; a plural left out is the hub's to choose
// (cairn.PluralForKind, or the plural of the kind already registered).
type Names struct {
	Kind       string   `json:"kind"`
	Singular   string   `json:"singular,omitempty"`
	Plural     string   `json:"plural,omitempty"`
	ShortNames []string `json:"shortNames,omitempty"`
	Categories []string `json:"categories,omitempty"`
}

// PrinterColumn is an extra column of `kubectl get`, as in a CRD.
type PrinterColumn struct {
	Name        string `json:"name"`
	Type        string `json:"type"` // integer, number, string, boolean, date
	Format      string `json:"format,omitempty"`
	Description string `json:"description,omitempty"`
	Priority    int    `json:"priority,omitempty"`
	JSONPath    string `json:"jsonPath"`
}

// Var is one seed 004 variable: $(Name) in a resource field declared in a
// varReference takes the value at FieldPath of the installation object
// (e.g. spec.region).
type Var struct {
	Name      string `json:"name"`
	FieldPath string `json:"fieldPath"`
}

// Output is a value computed from the parameters and the rendered (or
// observed) resources once an installation is applied.
type Output struct {
	Name string `json:"name"`
	// ID is an optional well-known identifier of what the output is (seed
	// 002's $id), so dependants can match outputs by meaning.
	ID          string `json:"$id,omitempty"`
	Description string `json:"description,omitempty"`
	// Value is a template: ${parameters.P}, ${installation.name|namespace|uid},
	// ${installation.labels.K}, ${resources.KIND.NAME.PATH} where NAME is the
	// resource's name in resources/ (before the installation's prefix).
	Value string `json:"value"`

	tpl *expr.Template
}

// Match selects rendered resources. Empty fields match anything; Name is
// the name in resources/ (before the installation's prefix).
type Match struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	Name       string `json:"name,omitempty"`
}

// ReadinessType is the kind of a readiness check, as Crossplane names them.
type ReadinessType string

const (
	NonEmpty       ReadinessType = "NonEmpty"
	MatchString    ReadinessType = "MatchString"
	MatchInteger   ReadinessType = "MatchInteger"
	MatchCondition ReadinessType = "MatchCondition"
	None           ReadinessType = "None"
)

// ReadinessCheck says when the resources it matches are ready. A child
// matched by no check is ready once it exists.
type ReadinessCheck struct {
	Match          Match           `json:"match"`
	Type           ReadinessType   `json:"type"`
	FieldPath      string          `json:"fieldPath,omitempty"`
	MatchString    string          `json:"matchString,omitempty"`
	MatchInteger   int64           `json:"matchInteger,omitempty"`
	MatchCondition *ConditionMatch `json:"matchCondition,omitempty"`
}

// ConditionMatch is a condition type and the status it must have (default
// "True").
type ConditionMatch struct {
	Type   string `json:"type"`
	Status string `json:"status,omitempty"`
}

// DeletionPriority gives the children it matches a deletion band.
type DeletionPriority struct {
	Match    Match `json:"match"`
	Priority int   `json:"priority"`
}
