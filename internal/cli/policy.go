package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cairn-dev/cairn"
	cairnclient "github.com/cairn-dev/cairn/client"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/policy"
)

// policyView is how the policy commands show the policy: the document as
// applied, with its version.
type policyView struct {
	ResourceVersion int           `json:"resourceVersion"`
	CreatedBy       string        `json:"createdBy,omitempty"`
	Policy          policy.Policy `json:"policy"`
}

func viewOf(doc hub.PolicyDocument) policyView {
	return policyView{ResourceVersion: doc.ResourceVersion, CreatedBy: doc.CreatedBy, Policy: doc.Policy}
}

func (a *app) policyCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Show, apply and explain the hub's policy (default backends, injected instances)",
		Long: `The policy chooses the storage backend of an instance created without one, by
Type path: typeInstance.rules[] {typeRef {path, revision?}, backend {id, description?}};
a path may end in .* (any deeper path) or be *. Selection: exact path and
revision, then exact path with any revision, then the longest matching prefix,
cap.* or * last; no match: the built-in backend. interface.default.inject and
per-rule oneOf[].inject list instances to inject (stored and validated now).

The policy is an instance (` + hub.PolicyTypePath + `, namespace ` + hub.SystemNamespace + `,
id ` + hub.PolicyID + `); every apply that changes it is a new resource
version ('cairn describe ` + hub.PolicyID + `' shows the history), and
one that does not writes nothing ("policy unchanged").`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	cmd.AddCommand(a.policyGetCommand(), a.policyApplyCommand(), a.policyExplainCommand())
	return cmd
}

func (a *app) policyGetCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "get",
		Short: "Print the current policy",
		Example: `  cairn policy get
  cairn policy get -o yaml`,
		Args: usageArgs(cobra.NoArgs),
		RunE: a.runE(func(cmd *cobra.Command, args []string, h cairnclient.Client) error {
			doc, err := h.GetPolicy(cmd.Context())
			if err != nil {
				return err
			}
			if printed, err := a.printData(cmd.OutOrStdout(), viewOf(doc)); printed {
				return err
			}
			return policyTable(cmd.OutOrStdout(), doc)
		}),
	}
}

func policyTable(w io.Writer, doc hub.PolicyDocument) error {
	if doc.ResourceVersion == 0 {
		_, err := fmt.Fprintln(w, "No policy applied: instances created without a backend go to the built-in backend.")
		return err
	}
	fmt.Fprintf(w, "Policy version %d (by %s)\n", doc.ResourceVersion, cmpOr(doc.CreatedBy, "-"))
	t := newTable(w, "#", "TYPE", "REVISION", "BACKEND", "DESCRIPTION")
	for i, r := range doc.Policy.TypeInstance.Rules {
		t.row(fmt.Sprint(i), r.TypeRef.Path, cmpOr(r.TypeRef.Revision, "*"), r.Backend.ID, cmpOr(r.Backend.Description, "-"))
	}
	if err := t.flush(); err != nil {
		return err
	}
	for _, inj := range doc.Policy.Injections() {
		fmt.Fprintf(w, "inject %s  (%s) at %s\n", inj.ID, cmpOr(inj.Description, "-"), inj.Field)
	}
	return nil
}

func (a *app) policyApplyCommand() *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "apply -f FILE",
		Short: "Validate a policy (YAML or JSON) and store it as the next version",
		Long: `apply validates the whole policy and lists every bad rule: each backend must
exist and be a storage backend (an alias of exactly one is accepted and stored
as its id), the catch-all rule's (* or cap.*) backend must accept an empty
context, and injected instances must exist. Nothing is stored when any fails.
The file is the policy, or what 'cairn policy get -o yaml|json' prints: then
the policy is its "policy" field, createdBy is ignored, and resourceVersion
must still be the current version (an apply in between is a conflict).`,
		Example: `  # policy.yaml:
  #   typeInstance:
  #     rules:
  #       - typeRef: {path: cap.type.aws.*}
  #         backend: {id: files, description: "example file backend"}
  #       - typeRef: {path: cap.*}
  #         backend: {id: cairn-builtin}
  cairn policy apply -f policy.yaml
  echo '{typeInstance: {rules: [{typeRef: {path: "*"}, backend: {id: cairn-builtin}}]}}' | cairn policy apply -f -
  # what get prints applies back, edited or not ("policy unchanged" when not):
  cairn policy get -o yaml > policy.yaml
  cairn policy apply -f policy.yaml`,
		Args: usageArgs(cobra.NoArgs),
		RunE: a.runE(func(cmd *cobra.Command, args []string, h cairnclient.Client) error {
			if file == "" {
				return usageErrorf("policy apply needs -f FILE (- for stdin)")
			}
			doc, err := a.readJSONFile(file)
			if err != nil {
				return err
			}
			in, err := parsePolicyInput(doc)
			if err != nil {
				return err
			}
			// The current version tells an unchanged apply (the hub
			// writes nothing and answers it) from a new one, and is the
			// precondition of a printed policy.
			cur, err := h.GetPolicy(cmd.Context())
			if err != nil {
				return err
			}
			if in.readAt != nil && *in.readAt != cur.ResourceVersion {
				return cairn.Errorf(cairn.CodeConflict, "%s: the policy was changed since it was read (resourceVersion %d, now %d); get it again and retry",
					file, *in.readAt, cur.ResourceVersion)
			}
			applied, err := h.ApplyPolicy(cmd.Context(), in.policy)
			if err != nil {
				return err
			}
			if printed, err := a.printData(cmd.OutOrStdout(), viewOf(applied)); printed {
				return err
			}
			verb := "applied"
			if cur.ResourceVersion != 0 && applied.ResourceVersion == cur.ResourceVersion {
				verb = "unchanged"
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "policy %s: version %d, %d typeInstance rules\n",
				verb, applied.ResourceVersion, len(applied.Policy.TypeInstance.Rules))
			return err
		}),
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", "policy file (YAML or JSON), - for stdin")
	addDryRunFlag(cmd)
	return cmd
}

// policyInput is a policy document as apply reads it.
type policyInput struct {
	policy policy.Policy
	// readAt is the resourceVersion of a printed policy: the version it
	// was read at, which must still be current. Nil for a bare policy.
	readAt *int
}

// policyViewFields are the top-level fields of policyView, in its order.
var policyViewFields = []string{"resourceVersion", "createdBy", "policy"}

// parsePolicyInput reads either the policy itself or what 'policy get -o
// yaml|json' prints (a policyView: the policy under "policy"), so that a
// printed policy, edited or not, applies back as kubectl's get | apply
// does. createdBy is ignored: an apply records its own caller.
func parsePolicyInput(doc json.RawMessage) (policyInput, error) {
	var top map[string]json.RawMessage
	if json.Unmarshal(doc, &top) != nil || top["policy"] == nil {
		p, err := policy.Parse(doc)
		return policyInput{policy: p}, err
	}
	var causes []cairn.Cause
	for k := range top {
		if !slices.Contains(policyViewFields, k) {
			causes = append(causes, cairn.Cause{Field: k, Message: "is not a known field (known: " + strings.Join(policyViewFields, ", ") + ")"})
		}
	}
	var in policyInput
	if raw, ok := top["resourceVersion"]; ok {
		var rv int
		if err := json.Unmarshal(raw, &rv); err != nil || rv < 0 {
			causes = append(causes, cairn.Cause{Field: "resourceVersion", Message: "must be the policy's version it was read at, a whole number; got " + string(raw)})
		}
		in.readAt = &rv
	}
	if len(causes) > 0 {
		slices.SortFunc(causes, func(a, b cairn.Cause) int { return strings.Compare(a.Field, b.Field) })
		msgs := make([]string, len(causes))
		for i, c := range causes {
			msgs[i] = c.Field + " " + c.Message
		}
		return policyInput{}, &cairn.Error{Code: cairn.CodeInvalid, Subject: "Policy", Causes: causes,
			Msg: "invalid policy: " + strings.Join(msgs, ", ")}
	}
	p, err := policy.Parse(top["policy"])
	if err != nil {
		return policyInput{}, err
	}
	in.policy = p
	return in, nil
}

func (a *app) policyExplainCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "explain PATH[:REVISION]",
		Short:   "Say which rule and backend the policy picks for a Type",
		Example: "  cairn policy explain cap.type.aws.auth.credentials:0.1.0",
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE: a.runE(func(cmd *cobra.Command, args []string, h cairnclient.Client) error {
			path, rev := splitRef(args[0])
			ex, err := h.ExplainPolicy(cmd.Context(), path, rev)
			if err != nil {
				return err
			}
			if printed, err := a.printData(cmd.OutOrStdout(), ex); printed {
				return err
			}
			backend := ex.BackendID
			if ex.BackendAlias != "" {
				backend = fmt.Sprintf("%s (%s)", ex.BackendAlias, ex.BackendID)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\nbackend: %s\n", ex.Message, backend)
			return err
		}),
	}
}
