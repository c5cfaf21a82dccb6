package cli

import (
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

//go:generate go run ./gendocs ../../docs/cli

// Reference writes the Markdown reference of every command, one page per
// command, into dir (docs/cli). Defaults that come from the environment
// show as the variables they come from ($HOME), so the pages do not depend
// on the machine that generated them.
func Reference(dir string) error {
	env := Env{
		Getenv: func(k string) string {
			if k == "HOME" {
				return "$HOME"
			}
			return ""
		},
		Now:   time.Now,
		Stdin: eofReader{},
	}
	a := &app{env: env}
	root := a.rootCommand()
	// cobra adds completion when the command runs; the reference has it too.
	root.InitDefaultCompletionCmd()
	var noTag func(c *cobra.Command)
	noTag = func(c *cobra.Command) {
		c.DisableAutoGenTag = true
		for _, sub := range c.Commands() {
			noTag(sub)
		}
	}
	noTag(root)
	return doc.GenMarkdownTree(root, dir)
}
