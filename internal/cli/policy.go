package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

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
id ` + hub.PolicyID + `); every apply is a new resource version:
'cairn describe ` + hub.PolicyID + `' shows the history.`,
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
context, and injected instances must exist. Nothing is stored when any fails.`,
		Example: `  # policy.yaml:
  #   typeInstance:
  #     rules:
  #       - typeRef: {path: cap.type.aws.*}
  #         backend: {id: files, description: "example file backend"}
  #       - typeRef: {path: cap.*}
  #         backend: {id: cairn-builtin}
  cairn policy apply -f policy.yaml
  echo '{typeInstance: {rules: [{typeRef: {path: "*"}, backend: {id: cairn-builtin}}]}}' | cairn policy apply -f -`,
		Args: usageArgs(cobra.NoArgs),
		RunE: a.runE(func(cmd *cobra.Command, args []string, h cairnclient.Client) error {
			if file == "" {
				return usageErrorf("policy apply needs -f FILE (- for stdin)")
			}
			doc, err := a.readJSONFile(file)
			if err != nil {
				return err
			}
			p, err := policy.Parse(doc)
			if err != nil {
				return err
			}
			applied, err := h.ApplyPolicy(cmd.Context(), p)
			if err != nil {
				return err
			}
			if printed, err := a.printData(cmd.OutOrStdout(), viewOf(applied)); printed {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "policy applied: version %d, %d typeInstance rules\n",
				applied.ResourceVersion, len(applied.Policy.TypeInstance.Rules))
			return err
		}),
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", "policy file (YAML or JSON), - for stdin")
	addDryRunFlag(cmd)
	return cmd
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
