package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/api/rest"
	"github.com/cairn-dev/cairn/api/rest/client"
	"github.com/cairn-dev/cairn/controller/install"
	stackctl "github.com/cairn-dev/cairn/controller/stack"
	"github.com/cairn-dev/cairn/deps"
	"github.com/cairn-dev/cairn/hub"
	"github.com/cairn-dev/cairn/stack"
)

// installAPI is what `cairn plan` and `cairn install` need: served by the
// hub with an in-process install controller (and stack controller) in
// local mode, by the server's plans and installs endpoints in client mode.
// (Written for both until the CLI has its one client interface.)
type installAPI interface {
	AddStack(ctx context.Context, archive []byte) (hub.StackEntry, bool, error)
	Plan(ctx context.Context, r install.Request) (rest.PlanStatus, error)
	Install(ctx context.Context, r install.Request, progress func(deps.Event)) (*rest.PlanStatus, *deps.Result, error)
}

type installFlags struct {
	params     []string
	paramFiles []string
	creds      []string
	name       string
	namespace  string
	deps       []string
	// depParams, depCreds: answers for dependencies' unmapped inputs.
	depParams []string
	depCreds  []string
}

// installCommands returns `plan` and `install`.
func installCommands(api func(ctx context.Context, fn func(installAPI) error) error, output *string, defineOutput bool) []*cobra.Command {
	var f installFlags
	request := func(ctx context.Context, a installAPI, arg string) (install.Request, error) {
		ref, err := stackArg(ctx, a, arg)
		if err != nil {
			return install.Request{}, err
		}
		params, err := parseParams(f.params, f.paramFiles)
		if err != nil {
			return install.Request{}, err
		}
		inputs, err := parseInputs(f.depParams, f.depCreds)
		if err != nil {
			return install.Request{}, err
		}
		r := install.Request{Namespace: f.namespace, Name: f.name, Stack: ref, Parameters: params, Dependencies: f.deps, Inputs: inputs}
		for _, c := range f.creds {
			k, v, ok := strings.Cut(c, "=")
			if !ok || k == "" || v == "" {
				return r, usageErrorf("--credential %q: want NAME=NAMESPACE/INSTANCE (a reference to the credential instance, never its value)", c)
			}
			if r.Credentials == nil {
				r.Credentials = map[string]string{}
			}
			r.Credentials[k] = v
		}
		return r, nil
	}
	plan := &cobra.Command{
		Use:   "plan STACK|PATH [-p NAME=VALUE]...",
		Short: "Show what installing a stack with its dependencies would create or reuse, and why",
		Long: `plan resolves the stack's dependencies against the catalog and the existing
installations (docs/dependencies.md) and prints the execution plan: each
installation reused or created and why each candidate was chosen or rejected,
the order (levels that may run in parallel), how outputs are wired into inputs,
and the required inputs nothing sets. It changes nothing, and fails when the
plan cannot complete. STACK is NAME or NAME@VERSION in the catalog; a PATH (a
directory or .tgz) is added to the catalog first, as cairn stack add does.`,
		Example: `  cairn plan team-portal -p team=data --name data-portal
  cairn plan reporting -p team=data --dependency sqlserver=SharedSQLServer/office-sql -o json`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return api(cmd.Context(), func(a installAPI) error {
				r, err := request(cmd.Context(), a, args[0])
				if err != nil {
					return err
				}
				st, err := a.Plan(cmd.Context(), r)
				if err != nil {
					return err
				}
				if err := printPlan(cmd.OutOrStdout(), *output, st); err != nil {
					return err
				}
				if !st.Ready {
					return fmt.Errorf("the plan cannot run: %s", st.Error)
				}
				return nil
			})
		},
	}
	inst := &cobra.Command{
		Use:   "install STACK|PATH [-p NAME=VALUE]...",
		Short: "Install a stack with its dependencies, reusing what already satisfies them",
		Long: `install plans as cairn plan does and executes the plan: independent
installations in parallel, each dependency's outputs flowing into its
dependents, a line per installation as it starts and finishes. On a failure it
stops, names the installation that failed and exits non-zero; what completed
stays installed, and running the same install again resumes where it stopped.`,
		Example: `  cairn install team-portal -p team=data --name data-portal`,
		Args:    usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			w := cmd.OutOrStdout()
			return api(cmd.Context(), func(a installAPI) error {
				r, err := request(cmd.Context(), a, args[0])
				if err != nil {
					return err
				}
				_, res, err := a.Install(cmd.Context(), r, func(e deps.Event) { printEvent(w, e) })
				if err != nil {
					return err
				}
				fmt.Fprintf(w, "done: %d installed, %d reused, %d already installed\n", len(res.Installed), len(res.Reused), len(res.Skipped))
				return nil
			})
		},
	}
	for _, c := range []*cobra.Command{plan, inst} {
		fl := c.Flags()
		fl.StringArrayVarP(&f.params, "param", "p", nil, "a parameter of the stack, NAME=VALUE (VALUE is read as YAML: 3, true, [a, b]; no, 0123 and other text stay strings; NAME may be dotted; repeat for more)")
		fl.StringArrayVarP(&f.paramFiles, "params-file", "f", nil, "a YAML or JSON file of parameters (-p wins over it)")
		fl.StringArrayVar(&f.creds, "credential", nil, "a credential of the stack, NAME=NAMESPACE/INSTANCE: a reference to the instance holding it")
		fl.StringVar(&f.name, "name", "", "name of the installation (default: the stack's name)")
		fl.StringVarP(&f.namespace, "namespace", "n", cairn.DefaultNamespace, "namespace of the installation")
		fl.StringArrayVar(&f.depParams, "dependency-param", nil, "answer a required parameter of a dependency that no mapping sets (the plan's unmapped inputs), PATH.NAME=VALUE: PATH is the dependency's path (flags, or web.db), VALUE read as -p reads it")
		fl.StringArrayVar(&f.depCreds, "dependency-credential", nil, "answer a required credential of a dependency that no mapping sets, PATH.NAME=NAMESPACE/INSTANCE: a reference to the instance holding it")
		fl.StringArrayVar(&f.deps, "dependency", nil, "resolve a dependency yourself: PATH=[NAMESPACE/]KIND/NAME (an existing installation, of the installation's namespace or the global one) or PATH=STACK@VERSION")
	}
	if defineOutput {
		plan.Flags().StringVarP(output, "output", "o", "text", "output format: text, json or yaml")
	}
	return []*cobra.Command{plan, inst}
}

// stackArg is the catalog reference of STACK|PATH: a path that exists is
// added to the catalog first.
func stackArg(ctx context.Context, a installAPI, arg string) (string, error) {
	if _, err := os.Stat(arg); err != nil {
		return arg, nil
	}
	s, err := stack.Load(ctx, arg)
	if err != nil {
		return "", err
	}
	archive, err := s.Archive()
	if err != nil {
		return "", err
	}
	e, _, err := a.AddStack(ctx, archive)
	if err != nil {
		return "", err
	}
	return e.Name + "@" + e.Version, nil
}

// parseInputs reads --dependency-param and --dependency-credential:
// PATH.NAME=VALUE, split at the last dot of the key (names have no dots).
func parseInputs(params, creds []string) (map[string]deps.Inputs, error) {
	var out map[string]deps.Inputs
	for _, flag := range []struct {
		name  string
		pairs []string
	}{{"--dependency-param", params}, {"--dependency-credential", creds}} {
		for _, p := range flag.pairs {
			k, v, ok := strings.Cut(p, "=")
			i := strings.LastIndex(k, ".")
			if !ok || i <= 0 || i == len(k)-1 || v == "" && flag.name == "--dependency-credential" {
				return nil, usageErrorf("%s %q: want PATH.NAME=VALUE (PATH the dependency's path: flags, or web.db)", flag.name, p)
			}
			path, name := k[:i], k[i+1:]
			if out == nil {
				out = map[string]deps.Inputs{}
			}
			in := out[path]
			if flag.name == "--dependency-credential" {
				if in.Credentials == nil {
					in.Credentials = map[string]string{}
				}
				in.Credentials[name] = v
			} else {
				x, err := parseParamValue(v)
				if err != nil {
					return nil, usageErrorf("%s %s: %v", flag.name, k, err)
				}
				if in.Parameters == nil {
					in.Parameters = map[string]any{}
				}
				in.Parameters[name] = x
			}
			out[path] = in
		}
	}
	return out, nil
}

func parseParams(pairs, files []string) (map[string]any, error) {
	out := map[string]any{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var m map[string]any
		if err := yaml.Unmarshal(b, &m); err != nil {
			return nil, fmt.Errorf("%s: not a YAML or JSON object of parameters: %w", f, err)
		}
		for k, v := range m {
			out[k] = v
		}
	}
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, usageErrorf("-p %q: want NAME=VALUE", p)
		}
		x, err := parseParamValue(v)
		if err != nil {
			return nil, usageErrorf("-p %s: %v", k, err)
		}
		if err := setDotted(out, k, x); err != nil {
			return nil, usageErrorf("-p %s: %v", k, err)
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

func printPlan(w io.Writer, output string, st rest.PlanStatus) error {
	if done, err := printStackData(w, output, st.Plan); done {
		return err
	}
	_, err := io.WriteString(w, st.Text)
	return err
}

func printEvent(w io.Writer, e deps.Event) {
	line := fmt.Sprintf("%-9s %-8s %s", e.Phase, e.Action, e.Node)
	if e.Elapsed > 0 {
		line += fmt.Sprintf(" (%s)", e.Elapsed.Round(time.Millisecond))
	}
	if e.Message != "" {
		line += ": " + e.Message
	}
	fmt.Fprintln(w, line)
}

// hubInstalls is installAPI in local mode: it runs the stack controller in
// process while an install waits for installations to be ready.
type hubInstalls struct {
	h   *hub.Hub
	svc *install.Service
}

func newHubInstalls(h *hub.Hub) hubInstalls {
	return hubInstalls{h: h, svc: &install.Service{Hub: h}}
}

func (s hubInstalls) AddStack(ctx context.Context, archive []byte) (hub.StackEntry, bool, error) {
	return s.h.AddStack(ctx, archive)
}

func (s hubInstalls) Plan(ctx context.Context, r install.Request) (rest.PlanStatus, error) {
	p, err := s.svc.Plan(ctx, r)
	if p == nil && err != nil {
		return rest.PlanStatus{}, err
	}
	return localPlanStatus(p, err), nil
}

func localPlanStatus(p *deps.Plan, err error) rest.PlanStatus {
	st := rest.PlanStatus{Plan: p, Ready: err == nil}
	if err != nil {
		st.Error = err.Error()
	}
	var b strings.Builder
	_ = p.WriteText(&b)
	st.Text = b.String()
	return st
}

func (s hubInstalls) Install(ctx context.Context, r install.Request, progress func(deps.Event)) (*rest.PlanStatus, *deps.Result, error) {
	defer runStackController(ctx, s.h)()
	p, res, err := s.svc.Install(ctx, r, progress)
	var st *rest.PlanStatus
	if p != nil {
		v := localPlanStatus(p, p.Ready())
		st = &v
	}
	return st, res, err
}

// runStackController runs the stack controller in process, for local mode,
// where no server runs it, until the returned stop is called (which waits
// for it to end).
func runStackController(ctx context.Context, h *hub.Hub) (stop func()) {
	c := stackctl.New(stackctl.Config{Hub: h, LeaseDuration: 3 * time.Second})
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(cctx) }()
	return func() { cancel(); <-done }
}

// restInstalls is installAPI in client mode.
type restInstalls struct{ c *client.Client }

func (s restInstalls) AddStack(ctx context.Context, archive []byte) (hub.StackEntry, bool, error) {
	return restStacks(s).AddStack(ctx, archive)
}

func (s restInstalls) Plan(ctx context.Context, r install.Request) (rest.PlanStatus, error) {
	return s.c.Plan(ctx, r)
}

func (s restInstalls) Install(ctx context.Context, r install.Request, progress func(deps.Event)) (*rest.PlanStatus, *deps.Result, error) {
	return s.c.Install(ctx, r, progress)
}
