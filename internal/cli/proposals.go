package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/cairn-dev/cairn"
	gitbackend "github.com/cairn-dev/cairn/backend/git"
	"github.com/cairn-dev/cairn/backend/scm"
	cairnclient "github.com/cairn-dev/cairn/client"
	"github.com/cairn-dev/cairn/store"
)

// proposalView is one proposal as `cairn proposals` shows it: recorded in
// the context of an instance's latest resource version (a Git backend in
// propose mode), with its state as the provider reports it now.
type proposalView struct {
	ID              string `json:"id"`
	Provider        string `json:"provider"`
	Number          int    `json:"number"`
	URL             string `json:"url"`
	Branch          string `json:"branch"`
	Base            string `json:"base,omitempty"`
	State           string `json:"state"` // open, merged, closed; "unknown: ..." when the provider cannot say
	Instance        string `json:"instance"`
	Ref             string `json:"ref"` // namespace/name
	ResourceVersion int    `json:"resourceVersion"`
	Backend         string `json:"backend"`

	provider scm.Provider
}

func (a *app) proposalsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "proposals",
		Short: "List, show, merge and close the pull requests of Git backends in propose mode",
		Long: `A Git backend with mode: propose turns each write into a branch
cairn/proposal/<id> and a pull request (GitHub, GitLab or Gitea). The hub
keeps the proposed resource version, whose backend context records the
proposal. These commands find the proposals recorded in the latest resource
versions of instances and ask the provider about them (tokens from the
variable the backend's scm.tokenEnv names).`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	cmd.AddCommand(
		&cobra.Command{
			Use:     "list",
			Short:   "List proposals with their state",
			Example: `  cairn proposals list`,
			Args:    usageArgs(cobra.NoArgs),
			RunE: a.runE(func(cmd *cobra.Command, args []string, h cairnclient.Client) error {
				ps, err := a.proposals(cmd.Context(), h, "")
				if err != nil {
					return err
				}
				if printed, err := a.printData(cmd.OutOrStdout(), ps); printed {
					return err
				}
				t := newTable(cmd.OutOrStdout(), "ID", "INSTANCE", "RV", "PROVIDER", "STATE", "URL")
				for _, p := range ps {
					t.row(p.ID, p.Ref, strconv.Itoa(p.ResourceVersion), p.Provider, p.State, p.URL)
				}
				return t.flush()
			}),
		},
		&cobra.Command{
			Use:     "show ID",
			Short:   "Show one proposal",
			Example: `  cairn proposals show 3f9c0a1b2d4e`,
			Args:    usageArgs(cobra.ExactArgs(1)),
			RunE: a.runE(func(cmd *cobra.Command, args []string, h cairnclient.Client) error {
				p, err := a.proposal(cmd.Context(), h, args[0])
				if err != nil {
					return err
				}
				if printed, err := a.printData(cmd.OutOrStdout(), p); printed {
					return err
				}
				return showProposal(cmd.OutOrStdout(), p)
			}),
		},
		&cobra.Command{
			Use:     "merge ID",
			Short:   "Merge a proposal's pull request through its provider",
			Example: `  cairn proposals merge 3f9c0a1b2d4e`,
			Args:    usageArgs(cobra.ExactArgs(1)),
			RunE: a.runE(func(cmd *cobra.Command, args []string, h cairnclient.Client) error {
				p, err := a.proposal(cmd.Context(), h, args[0])
				if err != nil {
					return err
				}
				if err := p.provider.Merge(cmd.Context(), p.Number); err != nil {
					return fmt.Errorf("merge proposal %s (%s): %w", p.ID, p.URL, err)
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "proposal %s merged into %s: %s\n", p.ID, cmpOr(p.Base, "the target branch"), p.URL)
				return err
			}),
		},
		&cobra.Command{
			Use:     "close ID",
			Short:   "Close a proposal's pull request without merging it",
			Example: `  cairn proposals close 3f9c0a1b2d4e`,
			Args:    usageArgs(cobra.ExactArgs(1)),
			RunE: a.runE(func(cmd *cobra.Command, args []string, h cairnclient.Client) error {
				p, err := a.proposal(cmd.Context(), h, args[0])
				if err != nil {
					return err
				}
				if err := p.provider.Close(cmd.Context(), p.Number); err != nil {
					return fmt.Errorf("close proposal %s (%s): %w", p.ID, p.URL, err)
				}
				_, err = fmt.Fprintf(cmd.OutOrStdout(), "proposal %s closed: %s\n(the hub keeps showing resource version %d of %s until it is written again)\n", p.ID, p.URL, p.ResourceVersion, p.Ref)
				return err
			}),
		},
	)
	return cmd
}

func showProposal(w io.Writer, p proposalView) error {
	_, err := fmt.Fprintf(w, "Proposal:  %s\nState:     %s\nURL:       %s\nProvider:  %s (#%d)\nBranch:    %s -> %s\nInstance:  %s (id %s, resource version %d)\nBackend:   %s\n",
		p.ID, p.State, p.URL, p.Provider, p.Number, p.Branch, cmpOr(p.Base, "-"), p.Ref, p.Instance, p.ResourceVersion, p.Backend)
	return err
}

// proposal finds one proposal by id.
func (a *app) proposal(ctx context.Context, h cairnclient.Interface, id string) (proposalView, error) {
	ps, err := a.proposals(ctx, h, id)
	if err != nil {
		return proposalView{}, err
	}
	if len(ps) == 0 {
		return proposalView{}, cairn.Errorf(cairn.CodeNotFound, "proposal %q not found in the latest resource version of any instance", id)
	}
	return ps[0], nil
}

// proposals lists the proposals recorded in instances' latest versions
// (only the one with id when id is not empty), with their state.
func (a *app) proposals(ctx context.Context, h cairnclient.Interface, id string) ([]proposalView, error) {
	insts, err := h.ListInstances(ctx, store.InstanceFilter{}, false)
	if err != nil {
		return nil, err
	}
	providers := map[string]scm.Provider{}
	providerErr := map[string]error{}
	out := []proposalView{}
	for _, inst := range insts {
		p := gitbackend.ProposalOf(inst.Latest.Context)
		if p == nil || (id != "" && p.ID != id) {
			continue
		}
		v := proposalView{ID: p.ID, Provider: p.Provider, Number: p.Number, URL: p.URL, Branch: p.Branch, Base: p.Base,
			Instance: inst.ID, Ref: refOf(inst.Namespace, inst.Name, inst.ID), ResourceVersion: inst.Latest.ResourceVersion, Backend: inst.Backend.ID}
		prov, ok := providers[v.Backend]
		if !ok && providerErr[v.Backend] == nil {
			prov, err = a.providerOf(ctx, h, v.Backend)
			providers[v.Backend], providerErr[v.Backend] = prov, err
		}
		if err := providerErr[v.Backend]; err != nil {
			if id != "" {
				return nil, err
			}
			v.State = "unknown: " + err.Error()
		} else {
			v.provider = prov
			pr, err := prov.Get(ctx, p.Number)
			switch {
			case err != nil && id != "":
				return nil, fmt.Errorf("proposal %s: %w", p.ID, err)
			case err != nil:
				v.State = "unknown: " + err.Error()
			default:
				v.State = pr.State
			}
		}
		out = append(out, v)
	}
	slices.SortFunc(out, func(x, y proposalView) int {
		if x.Ref != y.Ref {
			if x.Ref < y.Ref {
				return -1
			}
			return 1
		}
		return x.ResourceVersion - y.ResourceVersion
	})
	return out, nil
}

// providerOf is the SCM provider of the Git backend with id.
func (a *app) providerOf(ctx context.Context, h cairnclient.Interface, id string) (scm.Provider, error) {
	sb, err := h.StorageBackend(ctx, id)
	if err != nil {
		return nil, err
	}
	if !gitbackend.IsGit(sb) {
		return nil, cairn.Errorf(cairn.CodeInvalid, "backend %q is not a Git backend", id)
	}
	cfg, err := gitbackend.ParseConfig(sb.Value)
	if err != nil {
		return nil, err
	}
	return cfg.Provider(a.env.Getenv)
}

// proposalNote is what an apply line adds for a version whose backend
// context records a proposal.
func proposalNote(context json.RawMessage) string {
	p := gitbackend.ProposalOf(context)
	if p == nil {
		return ""
	}
	return fmt.Sprintf("proposal %s: %s pull request %s (branch %s)", p.ID, p.Provider, p.URL, p.Branch)
}

// withProposal appends the proposal note to an apply line's action.
func withProposal(action string, context json.RawMessage) string {
	if n := proposalNote(context); n != "" {
		return action + "; " + n
	}
	return action
}
