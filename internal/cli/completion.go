package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/cairn-dev/cairn"
)

// Shell completion (cairn completion bash|zsh|fish|powershell) of what only
// the hub or the configuration knows: resource types, object names in the
// namespace of -n, namespaces, contexts and the formats of -o, as kubectl
// completes them. A failure completes nothing: Tab must not print errors.

const noFiles = cobra.ShellCompDirectiveNoFileComp

// registerCompletions gives the commands of root their completions.
func (k *kube) registerCompletions(root *cobra.Command) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			switch f.Name {
			case "output":
				_ = c.RegisterFlagCompletionFunc(f.Name, fixedCompletion(usageChoices(f.Usage)))
			case "namespace":
				_ = c.RegisterFlagCompletionFunc(f.Name, k.completeNamespaces)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	_ = root.RegisterFlagCompletionFunc("context", completeContexts(k.env))

	for _, c := range root.Commands() {
		switch c.Name() {
		case "get", "describe":
			c.ValidArgsFunction = k.completeResourceArgs("get", -1)
		case "delete":
			c.ValidArgsFunction = k.completeResourceArgs("delete", -1)
		case "edit":
			c.ValidArgsFunction = k.completeResourceArgs("update", 1)
		case "types":
			k.completeFirstArg(c, []string{"get", "delete"}, "types")
		case "backends":
			k.completeFirstArg(c, []string{"get", "check", "rotate-keys"}, "backends")
		case "config":
			for _, sub := range c.Commands() {
				if sub.Name() == "use-context" || sub.Name() == "set-context" {
					sub.ValidArgsFunction = func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
						if len(args) > 0 {
							return nil, noFiles
						}
						return completeContexts(k.env)(cmd, args, toComplete)
					}
				}
			}
		}
	}
}

// usageChoices reads the formats a flag's usage lists ("output format:
// table, wide, json, yaml or name"), so that help and completion cannot
// disagree.
func usageChoices(usage string) []string {
	_, list, ok := strings.Cut(usage, ": ")
	if !ok {
		return nil
	}
	var out []string
	for part := range strings.SplitSeq(strings.ReplaceAll(list, " or ", ", "), ", ") {
		if part != "" && !strings.ContainsAny(part, " '()") {
			out = append(out, part)
		}
	}
	return out
}

func fixedCompletion(choices []string) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		return withPrefix(choices, toComplete), noFiles
	}
}

// withPrefix keeps the candidates that start with prefix, sorted and
// without duplicates.
func withPrefix(candidates []string, prefix string) []string {
	var out []string
	for _, c := range candidates {
		if strings.HasPrefix(c, prefix) {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func completeContexts(env Env) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		c, err := loadConfig(configPath(env))
		if err != nil {
			cobra.CompDebugln(err.Error(), false)
			return nil, noFiles
		}
		var names []string
		for _, x := range c.Contexts {
			names = append(names, x.Name)
		}
		return withPrefix(names, toComplete), noFiles
	}
}

// completionClient opens the invocation's client for a completion, which
// runs no PersistentPreRun. In local mode it opens only a store that
// exists: pressing Tab must not create one.
func (k *kube) completionClient(cmd *cobra.Command) bool {
	if k.c.Client != nil {
		return true
	}
	if k.targetErr != nil {
		return false
	}
	if k.target.url == "" && k.database == "" {
		if k.dataDir == "" {
			return false
		}
		if _, err := os.Stat(filepath.Join(k.dataDir, "cairn.db")); err != nil {
			return false
		}
	}
	if err := k.openClient(cmd.Context()); err != nil {
		cobra.CompDebugln(err.Error(), false)
		return false
	}
	return true
}

// completeResourceArgs completes RESOURCE (of those that serve verb), then
// the names of its objects (at most max of them; -1: any number), or
// RESOURCE/NAME.
func (k *kube) completeResourceArgs(verb string, max int) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if slices.ContainsFunc(args, func(a string) bool { return strings.Contains(a, "/") }) {
			return nil, noFiles
		}
		if max >= 0 && len(args) > max {
			return nil, noFiles
		}
		if !k.completionClient(cmd) {
			return nil, noFiles
		}
		ctx := cmd.Context()
		if len(args) == 0 {
			if typ, prefix, ok := strings.Cut(toComplete, "/"); ok {
				names := k.objectNames(cmd, typ)
				for i, n := range names {
					names[i] = typ + "/" + n
				}
				return withPrefix(names, typ+"/"+prefix), noFiles
			}
			all, err := k.discover(ctx)
			if err != nil {
				cobra.CompDebugln(err.Error(), false)
				return nil, noFiles
			}
			var names []string
			for _, res := range all {
				if slices.Contains(res.Verbs, verb) {
					names = append(names, res.Plural)
				}
			}
			return withPrefix(names, toComplete), noFiles
		}
		var names []string
		for _, n := range k.objectNames(cmd, args[0]) {
			if !slices.Contains(args[1:], n) {
				names = append(names, n)
			}
		}
		return withPrefix(names, toComplete), noFiles
	}
}

// completeFirstArg completes the single argument of the subcommands
// named by subs of parent with the names of resource plural.
func (k *kube) completeFirstArg(parent *cobra.Command, subs []string, plural string) {
	for _, sub := range parent.Commands() {
		if !slices.Contains(subs, sub.Name()) {
			continue
		}
		sub.ValidArgsFunction = func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			if len(args) > 0 || !k.completionClient(cmd) {
				return nil, noFiles
			}
			return withPrefix(k.objectNames(cmd, plural), toComplete), noFiles
		}
	}
}

// objectNames lists the names of the objects of resource typed (in the
// namespace of the command's -n), and the aliases of backends.
func (k *kube) objectNames(cmd *cobra.Command, typed string) []string {
	ctx := cmd.Context()
	res, err := k.findResource(ctx, typed)
	if err != nil || !slices.Contains(res.Verbs, "list") {
		return nil
	}
	ns, _ := cmd.Flags().GetString("namespace")
	list, err := k.c.ListAll(ctx, res, namespaceOf(res, ns), getOptions{output: "name"}.listOptions(res))
	if err != nil {
		cobra.CompDebugln(err.Error(), false)
		return nil
	}
	var names []string
	for _, raw := range list.Items {
		obj, err := decodeObject(raw)
		if err != nil {
			return nil
		}
		names = append(names, obj.Metadata.Name)
	}
	if isHub(res, "backends") {
		aliases, err := k.backendAliasMap(ctx)
		if err == nil {
			for _, a := range aliases {
				if a != "" {
					names = append(names, a)
				}
			}
		}
	}
	return names
}

// completeNamespaces completes -n with the namespaces instances are in
// (a namespace exists in cairn as long as something is in it).
func (k *kube) completeNamespaces(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if !k.completionClient(cmd) {
		return nil, noFiles
	}
	ctx := cmd.Context()
	res, err := k.findResource(ctx, "typeinstances")
	if err != nil {
		return nil, noFiles
	}
	list, err := k.c.ListAll(ctx, res, "", getOptions{output: "name"}.listOptions(res))
	if err != nil {
		cobra.CompDebugln(err.Error(), false)
		return nil, noFiles
	}
	names := []string{cairn.DefaultNamespace}
	for _, raw := range list.Items {
		// A TypeInstance, cluster-scoped by id, has its namespace in spec.
		var ti struct {
			Spec struct {
				Namespace string `json:"namespace"`
			} `json:"spec"`
		}
		if json.Unmarshal(raw, &ti) == nil && ti.Spec.Namespace != "" {
			names = append(names, ti.Spec.Namespace)
		}
	}
	return withPrefix(names, toComplete), noFiles
}
