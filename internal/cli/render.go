package cli

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	yaml3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"

	"github.com/cairn-dev/cairn/stack"
)

// renderCommand is `cairn render`: a stack rendered offline, as the stack
// controller would render it, for stack authors and CI. It never opens a
// store or talks to a server, so it is the same command in both modes.
func (a *app) renderCommand() *cobra.Command {
	var (
		params     []string
		paramFiles []string
		name       string
		namespace  string
		uid        string
		labels     []string
	)
	cmd := &cobra.Command{
		Use:   "render STACK",
		Short: "Render a stack package offline to YAML, as an installation of it would be",
		Long: `Render a stack package (a directory, a .tar.gz, or a Git repository as
URL@REF[//SUBDIR]) with the given parameters, exactly as the stack controller
renders an installation: kustomize over the package's resources/ with the
generated overlay (namePrefix NAME-, the stacks.cairn.dev labels, the
installation's labels, vars and replacements), then the built-in patchers.
Parameters are completed with the schema's defaults and validated. A stack
with configuration sets renders the set its field names (-p FIELD=SET; cairn
stack show lists them), or its default set.

The output is a multi-document YAML stream (-o json: one List), byte-identical
for the same input, so stack authors can compare it with a golden file in CI. Nothing
is stored and no server is contacted.`,
		Example: `  cairn render examples/stacks/minimal-gcp -p region=us-west1 -p projectID=my-project
  cairn render examples/stacks/minimal-gcp -f params.yaml --name prod --label team=infra
  cairn render examples/stacks/sql-env -p region=us-west2 -p tier=prod
  cairn render examples/stacks/minimal-gcp -p region=us-west1 -p projectID=my-project -p credentialsSecretRef.name=gcp-sa -p keepDefaultingLabels=true
  cairn render file:///srv/git/stacks.git@v0.1.0//minimal-gcp -f installation.yaml`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			s, err := stack.Load(ctx, args[0])
			if err != nil {
				return err
			}
			inst := s.NewInstallation(namespace, cmp.Or(name, s.Manifest.Name), uid, nil, map[string]any{})
			for _, f := range paramFiles {
				if err := readRenderParams(f, s, &inst, cmd.Flags().Changed("name"), cmd.Flags().Changed("namespace")); err != nil {
					return err
				}
			}
			if s.Manifest.Kind.Scope == stack.Cluster {
				// A cluster-scoped installation has no namespace, whatever
				// -n or the document says (the server clears it too).
				inst.Namespace = ""
			}
			for _, p := range params {
				key, val, ok := strings.Cut(p, "=")
				if !ok || key == "" {
					return usageErrorf("-p %q: want KEY=VALUE (KEY may be dotted: credentialsSecretRef.name=x)", p)
				}
				v, err := parseParamValue(val)
				if err != nil {
					return usageErrorf("-p %s: %v", key, err)
				}
				if err := setDotted(inst.Spec, key, v); err != nil {
					return usageErrorf("-p %s: %v", key, err)
				}
			}
			for _, l := range labels {
				k, v, ok := strings.Cut(l, "=")
				if !ok || k == "" {
					return usageErrorf("--label %q: want KEY=VALUE", l)
				}
				if inst.Labels == nil {
					inst.Labels = map[string]string{}
				}
				inst.Labels[k] = v
			}
			rs, err := stack.Renderer{}.Render(ctx, s, inst)
			if err != nil {
				return err
			}
			var buf bytes.Buffer
			if a.output == "json" {
				items := make([]map[string]any, len(rs))
				for i, r := range rs {
					items[i] = r.Object
				}
				b, err := json.MarshalIndent(map[string]any{"apiVersion": "v1", "kind": "List", "items": items}, "", "  ")
				if err != nil {
					return err
				}
				buf.Write(append(b, '\n'))
			} else if err := stack.EncodeYAML(&buf, rs); err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(buf.Bytes())
			return err
		},
	}
	f := cmd.Flags()
	f.StringArrayVarP(&params, "param", "p", nil, "parameter KEY=VALUE; VALUE is read as YAML (3, true, [a, b]; no, 0123 and other text stay strings), KEY may be dotted (repeatable)")
	f.StringArrayVarP(&paramFiles, "filename", "f", nil, "YAML file of parameters, or an installation manifest of the stack's kind (repeatable; -p wins)")
	f.StringVar(&name, "name", "", "installation name, the prefix of every resource (default: the stack's name)")
	f.StringVarP(&namespace, "namespace", "n", "default", "installation namespace; resources without one are put there")
	f.StringVar(&uid, "uid", "", "installation UID, for the stacks.cairn.dev/uid label (omitted when empty)")
	f.StringArrayVarP(&labels, "label", "l", nil, "installation label KEY=VALUE, propagated to every resource (repeatable)")
	return cmd
}

// readRenderParams reads -f FILE: an installation manifest of the stack's
// kind (its spec, and its name, namespace and labels unless flags gave
// them) or else a mapping of parameters.
func readRenderParams(file string, s *stack.Stack, inst *stack.Installation, nameSet, nsSet bool) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return usageErrorf("-f %s: %v", file, err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return usageErrorf("-f %s: not a YAML mapping: %v", file, err)
	}
	if _, isObject := doc["apiVersion"]; isObject {
		in, err := s.InstallationFromObject(doc)
		if err != nil {
			return fmt.Errorf("-f %s: %w", file, err)
		}
		if in.Name != "" && !nameSet {
			inst.Name = in.Name
		}
		if in.Namespace != "" && !nsSet {
			inst.Namespace = in.Namespace
		}
		if len(in.Labels) > 0 && inst.Labels == nil {
			inst.Labels = map[string]string{}
		}
		maps.Copy(inst.Labels, in.Labels)
		maps.Copy(inst.Spec, in.Spec)
		return nil
	}
	maps.Copy(inst.Spec, doc)
	return nil
}

// Numbers a -p VALUE may be, as a person writes them: YAML's other
// spellings (0x1F, 0o17, 1_000, .inf) stay the text typed.
var (
	paramIntRE   = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)
	paramFloatRE = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$`)
)

// parseParamValue reads a -p VALUE (render, plan and install alike) as
// YAML 1.2 reads it, except that a plain scalar is a boolean only when it
// is true or false and a number only when written in decimal: YAML 1.1's
// yes/no/on/off, a leading zero (an octal there, a zip code to a person),
// a date or null stay the string typed, so -p country=no is "no". Quotes
// make anything a string; [a, b] and {k: v} are a list and a mapping. An
// empty value is the empty string.
func parseParamValue(s string) (any, error) {
	if s == "" {
		return "", nil
	}
	var doc yaml3.Node
	if err := yaml3.Unmarshal([]byte(s), &doc); err != nil {
		return nil, fmt.Errorf("value %q: %w", s, err)
	}
	if len(doc.Content) != 1 {
		return s, nil
	}
	n := doc.Content[0]
	if n.HeadComment != "" || n.LineComment != "" || n.FootComment != "" || doc.HeadComment != "" || doc.FootComment != "" {
		return s, nil // "Team #1" is text, not "Team" and a comment
	}
	if (n.Kind == yaml3.MappingNode || n.Kind == yaml3.SequenceNode) && n.Style&yaml3.FlowStyle == 0 {
		return s, nil // "Note: hello" is text; [a, b] and {k: v} are not
	}
	if n.Kind == yaml3.ScalarNode && n.Style&yaml3.TaggedStyle == 0 {
		if n.Style != 0 {
			return n.Value, nil // quoted
		}
		switch {
		case n.Value == "true" || n.Value == "false":
			return n.Value == "true", nil
		case paramIntRE.MatchString(n.Value) || paramFloatRE.MatchString(n.Value):
			return strconv.ParseFloat(n.Value, 64)
		}
		return n.Value, nil
	}
	var v any
	if err := n.Decode(&v); err != nil {
		return nil, fmt.Errorf("value %q: %w", s, err)
	}
	// The same Go types as a JSON or -f file gives (float64 numbers).
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("value %q: %w", s, err)
	}
	v = nil
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("value %q: %w", s, err)
	}
	return v, nil
}

// setDotted sets m[a][b][c] for the key a.b.c, creating mappings.
func setDotted(m map[string]any, key string, v any) error {
	parts := strings.Split(key, ".")
	for i, p := range parts[:len(parts)-1] {
		if p == "" {
			return fmt.Errorf("empty segment in key")
		}
		next, ok := m[p].(map[string]any)
		if !ok {
			if _, exists := m[p]; exists {
				return fmt.Errorf("%s is not a mapping", strings.Join(parts[:i+1], "."))
			}
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	last := parts[len(parts)-1]
	if last == "" {
		return fmt.Errorf("empty segment in key")
	}
	m[last] = v
	return nil
}
