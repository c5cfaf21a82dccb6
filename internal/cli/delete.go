package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/api/rest"
	"github.com/cairn-dev/cairn/api/rest/client"
	stackctl "github.com/cairn-dev/cairn/controller/stack"
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
	var inst *cairn.Instance
	if r.hub != nil && !cairn.IsDryRun(ctx) {
		var err error
		if inst, err = r.checkUninstall(ctx, res, ns, name); err != nil {
			return err
		}
	}
	err := r.c.Delete(ctx, res, ns, name, client.WriteOptions{LockOwner: o.owner})
	if cairn.HasCode(err, cairn.CodeNotFound) && o.ignoreNotFound {
		return nil
	}
	if err != nil {
		return err
	}
	if inst != nil {
		if err := r.uninstall(ctx, *inst); err != nil {
			return fmt.Errorf("%s %q: %w", kindName(res), name, err)
		}
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
			cur, found, lerr := r.lookup(ctx, p, false)
			switch {
			case lerr != nil:
				errs = append(errs, lerr) // it names the document
				continue
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

// checkUninstall, in local mode, returns the installation that deleting
// res ns/name hands to the stack controller (an installation that owns
// children), or nil when the delete is immediate. No server's controller
// deletes the children in local mode, so cairn delete does (uninstall);
// what would block it (a child locked or used from outside the stack) is
// refused before the deletion is requested, so a refused delete changes
// nothing.
func (r *kube) checkUninstall(ctx context.Context, res client.Resource, ns, name string) (*cairn.Instance, error) {
	obj, err := r.getObject(ctx, res, ns, name)
	if err != nil {
		return nil, nil // the delete says what is wrong (or ignores it)
	}
	inst, err := r.hub.GetInstance(ctx, obj.Metadata.UID, false)
	if cairn.HasCode(err, cairn.CodeNotFound) {
		return nil, nil // not an instance: a Type, a namespace, ...
	}
	if err != nil {
		return nil, err
	}
	if ok, err := r.hub.IsInstallationType(ctx, inst.TypeRef); err != nil || !ok {
		return nil, err
	}
	kids, err := r.hub.Children(ctx, inst)
	if err != nil || len(kids) == 0 {
		return nil, err
	}
	if err := r.hub.CheckOwnedDeletable(ctx, inst.ID, kids, ""); err != nil {
		return nil, fmt.Errorf("%s %q cannot be deleted, nothing was: %w", kindName(res), name, err)
	}
	return &inst, nil
}

// uninstallTimeout bounds how long cairn delete runs the stack controller
// in local mode for an installation's children to go.
const uninstallTimeout = 2 * time.Minute

// uninstall runs the stack controller in process, as cairn install does in
// local mode, until the installation whose deletion was requested is gone:
// its children band by band, nested installations first, then itself.
func (r *kube) uninstall(ctx context.Context, inst cairn.Instance) error {
	defer runStackController(ctx, r.hub)()
	deadline := time.Now().Add(uninstallTimeout)
	for {
		cur, err := r.hub.GetInstance(ctx, inst.ID, false)
		if cairn.HasCode(err, cairn.CodeNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		var st stackctl.Status
		_ = json.Unmarshal(cur.Status, &st)
		var deleting *stackctl.Condition
		for i := range st.Conditions {
			if st.Conditions[i].Type == "Deleting" {
				deleting = &st.Conditions[i]
			}
		}
		if deleting != nil && deleting.Reason == "DeletionBlocked" {
			return cairn.Errorf(cairn.CodeLocked, "the deletion is requested but blocked (it goes on when cairn delete runs again, or in cairn serve): %s", deleting.Message)
		}
		if time.Now().After(deadline) {
			msg := "no progress reported"
			if deleting != nil {
				msg = deleting.Message
			}
			return cairn.Errorf(cairn.CodeUnavailable, "not deleted after %s (the deletion stays requested; cairn delete or cairn serve continues it): %s", uninstallTimeout, msg)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
