package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/api/rest"
	"github.com/cairn-dev/cairn/api/rest/client"
	"github.com/cairn-dev/cairn/manifest"
)

type deleteOptions struct {
	files          []string
	namespace      string
	selector       string
	owner          string
	ignoreNotFound bool
}

func (r *kube) deleteCommand() *cobra.Command {
	var o deleteOptions
	cmd := &cobra.Command{
		Use:   "delete RESOURCE NAME... | delete RESOURCE/NAME... | delete RESOURCE -l SELECTOR | delete -f FILE",
		Short: "Delete resources by name, by label selector or as the documents of files describe them",
		Long: `delete removes objects and their values. It is refused while other instances use
an instance (exit code 5), and while it is locked by an owner other than
--lock-owner. With -f it deletes what the documents describe: objects and
TypeInstances first, in reverse document order (so users go before what they
use), then Types.`,
		Example: `  cairn delete flag new-project
  cairn delete flags -l team=moonshots
  cairn delete ti 3f8a3c2e-5b9e-4c47-9a51-0c1d7e1b2a10 --lock-owner deploy-42
  cairn delete -f examples/quickstart`,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, w := cmd.Context(), cmd.OutOrStdout()
			if len(o.files) > 0 {
				if len(args) > 0 {
					return usageErrorf("give either -f or RESOURCE NAME, not both")
				}
				return r.deleteFiles(ctx, w, o, cmd.Flags().Changed("namespace"))
			}
			groups, err := r.parseResourceArgs(ctx, args, o.namespace)
			if err != nil {
				return err
			}
			var errs []error
			for _, g := range groups {
				if err := require(g.res, "delete"); err != nil {
					return err
				}
				ns := namespaceOf(g.res, o.namespace)
				names := g.names
				switch {
				case len(names) > 0 && o.selector != "":
					return usageErrorf("name cannot be provided when a selector is specified")
				case len(names) == 0 && o.selector == "":
					return usageErrorf("resource(s) were provided, but no name was specified: give NAME... or -l SELECTOR")
				case len(names) == 0:
					l, err := r.c.ListAll(ctx, g.res, ns, client.ListOptions{LabelSelector: o.selector})
					if err != nil {
						return err
					}
					for _, raw := range l.Items {
						obj, err := decodeObject(raw)
						if err != nil {
							return err
						}
						names = append(names, obj.Metadata.Name)
					}
					if len(names) == 0 {
						fmt.Fprintln(cmd.ErrOrStderr(), noResources([]resourceNames{g}, getOptions{namespace: o.namespace}))
					}
				}
				for _, name := range names {
					id, err := r.resolveName(ctx, g.res, name)
					if err == nil {
						err = r.deleteOne(ctx, w, g.res, ns, id, o)
					}
					if err != nil {
						errs = append(errs, err)
					}
				}
			}
			return joinErrors(errs)
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVarP(&o.files, "filename", "f", nil, "file, directory or - (stdin) whose documents to delete; repeatable")
	fl.StringVarP(&o.namespace, "namespace", "n", cairn.DefaultNamespace, "namespace of namespaced resources")
	fl.StringVarP(&o.selector, "selector", "l", "", "delete every object the label selector matches")
	fl.StringVar(&o.owner, "lock-owner", "", "lock owner, to delete objects locked by it")
	fl.BoolVar(&o.ignoreNotFound, "ignore-not-found", false, "treat objects that do not exist as deleted")
	addDryRunFlag(cmd)
	return cmd
}

func (r *kube) deleteOne(ctx context.Context, w io.Writer, res client.Resource, ns, name string, o deleteOptions) error {
	err := r.c.Delete(ctx, res, ns, name, client.WriteOptions{LockOwner: o.owner})
	if cairn.HasCode(err, cairn.CodeNotFound) && o.ignoreNotFound {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s %q deleted\n", kindName(res), name)
	return err
}

// deleteFiles deletes what the documents describe.
func (r *kube) deleteFiles(ctx context.Context, w io.Writer, o deleteOptions, explicitNS bool) error {
	docs, err := r.readDocs(o.files)
	if err != nil {
		return err
	}
	a := &applier{r: r, w: w, namespace: o.namespace, explicit: explicitNS}
	var errs []error
	for _, d := range slices.Backward(docs) {
		var err error
		switch d.class {
		case classType:
			continue
		case classInstance:
			p := &plan{doc: manifest.Document{Pos: d.raw.Pos, Kind: manifest.KindTypeInstance, Instance: d.inst}, in: d.inst}
			cur, found, lerr := r.lookup(ctx, p)
			switch {
			case lerr != nil:
				err = lerr
			case !found && !o.ignoreNotFound:
				err = p.errorf(cairn.CodeNotFound, "no TypeInstance to delete: %s", describeDoc(d.inst))
			case found:
				err = r.deleteOne(ctx, w, client.TypeInstances, "", cur.Metadata.UID, o)
			}
		default:
			err = a.deleteObject(ctx, d, o)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", d.raw.Pos, err))
		}
	}
	for _, d := range slices.Backward(docs) {
		if d.class != classType {
			continue
		}
		for _, t := range slices.Backward(d.types) {
			if err := r.deleteOne(ctx, w, client.Types, "", rest.TypeName(t.Ref()), o); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", d.raw.Pos, err))
			}
		}
	}
	return joinErrors(errs)
}

func (a *applier) deleteObject(ctx context.Context, d rdoc, o deleteOptions) error {
	res, err := a.r.resourceFor(ctx, d.raw.APIVersion, d.raw.Kind)
	if err != nil {
		return err
	}
	if err := require(res, "delete"); err != nil {
		return err
	}
	meta, err := decodeMeta(d.raw.JSON)
	if err != nil {
		return err
	}
	if meta.Name == "" {
		return cairn.Errorf(cairn.CodeInvalid, "metadata.name is required")
	}
	ns, err := a.namespaceFor(res, meta.Namespace)
	if err != nil {
		return err
	}
	return a.r.deleteOne(ctx, a.w, res, ns, meta.Name, o)
}

func (r *kube) lockCommand(lock bool) *cobra.Command {
	var owner, namespace string
	verb, done := "lock", "locked"
	if !lock {
		verb, done = "unlock", "unlocked"
	}
	title := strings.ToUpper(verb[:1]) + verb[1:]
	cmd := &cobra.Command{
		Use:   verb + " ID... --owner OWNER",
		Short: title + " TypeInstances, all or nothing",
		Long: fmt.Sprintf(`%s %ss every TypeInstance given, or none when any is missing or locked by
another owner. Name them by id, or as RESOURCE/NAME (flag/new-project). A locked
instance is written and deleted only with --lock-owner set to its owner.`, title, verb),
		Example: fmt.Sprintf("  cairn %s 3f8a3c2e-5b9e-4c47-9a51-0c1d7e1b2a10 --owner deploy-42\n  cairn %s flag/new-project --owner deploy-42", verb, verb),
		Args:    usageArgs(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if owner == "" {
				return usageErrorf("%s needs --owner", verb)
			}
			ctx := cmd.Context()
			ids := make([]string, 0, len(args))
			for _, arg := range args {
				if !strings.Contains(arg, "/") {
					ids = append(ids, arg)
					continue
				}
				groups, err := r.parseResourceArgs(ctx, []string{arg}, namespace)
				if err != nil {
					return err
				}
				g := groups[0]
				obj, err := r.getObject(ctx, g.res, namespaceOf(g.res, namespace), g.names[0])
				if err != nil {
					return err
				}
				ids = append(ids, obj.Metadata.UID)
			}
			var err error
			if lock {
				err = r.c.Lock(ctx, ids, owner)
			} else {
				err = r.c.Unlock(ctx, ids, owner)
			}
			if err != nil {
				return err
			}
			for _, id := range ids {
				if _, err := fmt.Fprintf(cmd.OutOrStdout(), "typeinstance.%s/%s %s by %s\n", rest.HubGroup, id, done, owner); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&owner, "owner", "", "lock owner (required)")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", cairn.DefaultNamespace, "namespace of objects named RESOURCE/NAME")
	addDryRunFlag(cmd)
	return cmd
}
