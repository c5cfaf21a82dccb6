package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/api/terraform"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/tfstate"
)

// tfStates is what `cairn tf` needs: the hub in local mode, the server's
// state protocol endpoints in client mode (tfRemote).
type tfStates interface {
	TerraformStateHistory(ctx context.Context, ns, name string) ([]hub.TerraformStateVersion, error)
	TerraformStateDiff(ctx context.Context, ns, name string, from, to int) (tfstate.Diff, error)
}

// tfCommand is `cairn tf`, written once; with runs fn against the mode's
// tfStates.
func tfCommand(out func() io.Writer, with func(ctx context.Context, fn func(tfStates) error) error) *cobra.Command {
	var ns, output string
	cmd := &cobra.Command{
		Use:   "tf",
		Short: "OpenTofu/Terraform states kept in cairn: history and diff",
		Long: `A state written by OpenTofu or Terraform through cairn's HTTP state backend
(backend "http" at /terraform/v1/namespaces/NS/states/NAME, see docs/terraform.md)
is an instance whose resource versions are the state's writes.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	cmd.PersistentFlags().StringVarP(&ns, "namespace", "n", cairn.DefaultNamespace, "namespace of the state")
	cmd.PersistentFlags().StringVarP(&output, "output", "o", "", "output format: '' (table) or json")
	checkOutput := func() error {
		if output != "" && output != "json" {
			return usageErrorf("--output %q: use json or leave it out", output)
		}
		return nil
	}
	history := &cobra.Command{
		Use:     "history NAME",
		Short:   "List the writes of a state (one resource version each)",
		Example: "  cairn tf history network",
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(); err != nil {
				return err
			}
			return with(cmd.Context(), func(s tfStates) error {
				list, err := s.TerraformStateHistory(cmd.Context(), ns, args[0])
				if err != nil {
					return err
				}
				if output == "json" {
					return writeJSONOut(out(), list)
				}
				tw := tabwriter.NewWriter(out(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "VERSION\tSERIAL\tLINEAGE\tRESOURCES\tOUTPUTS\tTOFU\tCREATED\tBY")
				for _, v := range list {
					fmt.Fprintf(tw, "%d\t%d\t%s\t%d\t%d\t%s\t%s\t%s\n", v.ResourceVersion, v.Serial, v.Lineage, v.Resources, v.Outputs,
						v.TerraformVersion, v.CreatedAt, v.CreatedBy)
				}
				return tw.Flush()
			})
		},
	}
	diff := &cobra.Command{
		Use:     "diff NAME V1 V2",
		Short:   "Show the resources and outputs that changed between two versions of a state",
		Example: "  cairn tf diff network 2 5",
		Args:    usageArgs(cobra.ExactArgs(3)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(); err != nil {
				return err
			}
			var v [2]int
			for i, a := range args[1:] {
				n, err := strconv.Atoi(a)
				if err != nil || n < 1 {
					return usageErrorf("%q is not a resource version of the state (a positive integer, see cairn tf history)", a)
				}
				v[i] = n
			}
			return with(cmd.Context(), func(s tfStates) error {
				d, err := s.TerraformStateDiff(cmd.Context(), ns, args[0], v[0], v[1])
				if err != nil {
					return err
				}
				if output == "json" {
					return writeJSONOut(out(), d)
				}
				w := out()
				if d.Empty() {
					fmt.Fprintf(w, "no changes between versions %d and %d\n", v[0], v[1])
					return nil
				}
				for _, g := range []struct {
					sign, what string
					names      []string
				}{
					{"+", "resource", d.ResourcesAdded}, {"-", "resource", d.ResourcesRemoved}, {"~", "resource", d.ResourcesChanged},
					{"+", "output", d.OutputsAdded}, {"-", "output", d.OutputsRemoved}, {"~", "output", d.OutputsChanged},
				} {
					for _, n := range g.names {
						fmt.Fprintf(w, "%s %s %s\n", g.sign, g.what, n)
					}
				}
				return nil
			})
		},
	}
	cmd.AddCommand(history, diff)
	return cmd
}

func writeJSONOut(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func (a *app) tfCommand() *cobra.Command {
	return tfCommand(func() io.Writer { return a.env.Stdout }, func(ctx context.Context, fn func(tfStates) error) error {
		if a.hub != nil {
			return fn(a.hub) // local mode
		}
		return fn(tfRemote{base: strings.TrimSuffix(a.target.url, "/"), actor: a.as})
	})
}

// tfRemote reads history and diffs from a server's state protocol
// endpoints.
type tfRemote struct {
	base  string
	actor string
}

func (t tfRemote) get(ctx context.Context, ns, name, sub string, q url.Values, v any) error {
	u := t.base + terraform.Prefix + "namespaces/" + url.PathEscape(ns) + "/states/" + url.PathEscape(name) + "/" + sub
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	if t.actor != "" {
		req.Header.Set("Impersonate-User", t.actor)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return &cairn.Error{Code: cairn.CodeUnavailable, Msg: fmt.Sprintf("GET %s: %v", u, err), Err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("GET %s: %w", u, err)
	}
	if resp.StatusCode != http.StatusOK {
		code := cairn.CodeInternal
		switch resp.StatusCode {
		case http.StatusNotFound:
			code = cairn.CodeNotFound
		case http.StatusBadRequest:
			code = cairn.CodeInvalid
		case http.StatusConflict:
			code = cairn.CodeConflict
		case http.StatusServiceUnavailable:
			code = cairn.CodeUnavailable
		}
		return &cairn.Error{Code: code, Msg: strings.TrimSpace(string(body))}
	}
	return json.Unmarshal(body, v)
}

func (t tfRemote) TerraformStateHistory(ctx context.Context, ns, name string) ([]hub.TerraformStateVersion, error) {
	var list []hub.TerraformStateVersion
	return list, t.get(ctx, ns, name, "history", nil, &list)
}

func (t tfRemote) TerraformStateDiff(ctx context.Context, ns, name string, from, to int) (tfstate.Diff, error) {
	var d tfstate.Diff
	q := url.Values{"from": {strconv.Itoa(from)}, "to": {strconv.Itoa(to)}}
	return d, t.get(ctx, ns, name, "diff", q, &d)
}
