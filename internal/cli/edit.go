package cli

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/api/rest/client"
)

const editHeader = `# Edit the object below and save to replace it on the server; an unchanged
# object cancels the edit. Lines beginning with '#' are ignored.
# The replace is conditional on the resourceVersion read: if someone changed the
# object meanwhile, it fails with a conflict and your edit is kept in this file.
#
`

func (r *kube) editCommand() *cobra.Command {
	var namespace, owner, output string
	cmd := &cobra.Command{
		Use:   "edit RESOURCE NAME | edit RESOURCE/NAME",
		Short: "Edit a resource in $EDITOR and replace it",
		Long: `edit reads an object, opens it in an editor ($CAIRN_EDITOR, else $EDITOR, else
vi) as YAML (or JSON with -o json), and replaces the object with what was saved
(PUT), on the condition that it has not changed since it was read. Saving the
object unchanged cancels the edit.`,
		Example: `  cairn edit flag new-project
  EDITOR=nano cairn edit ti 3f8a3c2e-5b9e-4c47-9a51-0c1d7e1b2a10`,
		Args: usageArgs(cobra.RangeArgs(1, 2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "yaml" && output != "json" {
				return usageErrorf("--output %q: want yaml or json", output)
			}
			ctx := cmd.Context()
			groups, err := r.parseResourceArgs(ctx, args, namespace)
			if err != nil {
				return err
			}
			if len(groups) != 1 || len(groups[0].names) != 1 {
				return usageErrorf("edit takes one object: RESOURCE NAME or RESOURCE/NAME")
			}
			res := groups[0].res
			if err := require(res, "update"); err != nil {
				return err
			}
			ns := namespaceOf(res, namespace)
			cur, err := r.getObject(ctx, res, ns, groups[0].names[0])
			if err != nil {
				return err
			}
			content, err := editContent(cur, output)
			if err != nil {
				return err
			}
			// $TMPDIR through Env, like every other input of a command.
			f, err := os.CreateTemp(r.env.Getenv("TMPDIR"), "cairn-edit-*."+output)
			if err != nil {
				return fmt.Errorf("create the file to edit: %w", err)
			}
			path := f.Name()
			_, werr := f.Write(content)
			if err := cmp.Or(werr, f.Close()); err != nil {
				os.Remove(path)
				return fmt.Errorf("write %s: %w", path, err)
			}
			keep := false
			defer func() {
				if !keep {
					os.Remove(path)
				}
			}()

			editor := cmp.Or(r.env.Getenv(EnvEditor), r.env.Getenv("EDITOR"), "vi")
			// Through the shell, so an editor with arguments ("code --wait")
			// works as it does for git and kubectl.
			run := exec.CommandContext(ctx, "sh", "-c", editor+` "$1"`, "cairn-edit", path)
			run.Stdin, run.Stdout, run.Stderr = r.env.Stdin, r.env.Stdout, r.env.Stderr
			if err := run.Run(); err != nil {
				return fmt.Errorf("the editor %q failed: %w", editor, err)
			}
			edited, err := os.ReadFile(path)
			if err != nil {
				return fmt.Errorf("read %s: %w", path, err)
			}
			obj, err := yaml.YAMLToJSON(edited)
			if err != nil {
				keep = true
				return cairn.Errorf(cairn.CodeInvalid, "the edited object is not valid YAML or JSON (kept in %s): %w", path, err)
			}
			if cairn.JSONEqual(obj, cur.raw) {
				_, err := fmt.Fprintln(cmd.OutOrStdout(), "Edit cancelled, no changes made.")
				return err
			}
			var m map[string]any
			if err := json.Unmarshal(obj, &m); err != nil || m == nil {
				keep = true
				return cairn.Errorf(cairn.CodeInvalid, "the edited document is not an object (kept in %s)", path)
			}
			// The version read, whatever the file says now: the replace must
			// fail if the object changed since it was opened.
			md, _ := m["metadata"].(map[string]any)
			if md == nil {
				md = map[string]any{}
				m["metadata"] = md
			}
			md["resourceVersion"] = cur.Metadata.ResourceVersion
			if _, err := r.c.Replace(ctx, res, ns, cur.Metadata.Name, m, client.WriteOptions{LockOwner: owner}); err != nil {
				keep = true
				return &cairn.Error{Code: cairn.ErrorCode(err), Causes: cairn.Causes(err), Err: err,
					Msg: fmt.Sprintf("%v\nyour edit is kept in %s", err, path)}
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s/%s edited\n", kindName(res), cur.Metadata.Name)
			return err
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", cairn.DefaultNamespace, "namespace of a namespaced resource")
	cmd.Flags().StringVar(&owner, "lock-owner", "", "lock owner, to edit an object locked by it")
	cmd.Flags().StringVarP(&output, "output", "o", "yaml", "format to edit in: yaml or json")
	addDryRunFlag(cmd)
	return cmd
}

func editContent(obj object, format string) ([]byte, error) {
	if format == "json" {
		// JSON has no comments: the object alone.
		b, err := json.MarshalIndent(obj.raw, "", "  ")
		if err != nil {
			return nil, fmt.Errorf("encode the object: %w", err)
		}
		return append(b, '\n'), nil
	}
	y, err := yaml.JSONToYAML(obj.raw)
	if err != nil {
		return nil, fmt.Errorf("encode the object: %w", err)
	}
	return append([]byte(editHeader), y...), nil
}
