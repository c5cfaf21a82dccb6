package cli_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairn-dev/cairn/internal/cli"
)

// placeholderID is the TypeInstance id of the help's examples.
const placeholderID = "3f8a3c2e-5b9e-4c47-9a51-0c1d7e1b2a10"

// helpExample is one line of a command's Examples.
type helpExample struct{ page, line string }

// helpExamples reads the Examples of every command from the reference
// (docs/cli), which TestReferenceIsCurrent keeps what --help prints.
func helpExamples(t *testing.T) (examples []helpExample, without []string) {
	t.Helper()
	pages, err := filepath.Glob("../../docs/cli/cairn*.md")
	if err != nil || len(pages) == 0 {
		t.Fatalf("no reference pages: %v", err)
	}
	for _, p := range pages {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		page := strings.TrimSuffix(filepath.Base(p), ".md")
		_, rest, ok := strings.Cut(string(b), "### Examples\n\n```\n")
		if !ok {
			without = append(without, page)
			continue
		}
		block, _, _ := strings.Cut(rest, "```\n")
		for line := range strings.SplitSeq(block, "\n") {
			if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
				examples = append(examples, helpExample{page, line})
			}
		}
	}
	return examples, without
}

// Every command's help has examples, and each runs as printed on the
// examples/ directory's quickstart and flags: exit 0 and no error. The
// hub's commands run against a server (their local mode is the same
// commands on an in-process hub, which the other tests run in both modes
// and which would cost a store opening per command); the commands of this
// machine (backup, migrate, config, ...) in local mode. An example this
// test cannot run says why in notRun, so a new one is run unless someone
// says it cannot be.
func TestHelpExamples(t *testing.T) {
	examples, without := helpExamples(t)
	// Commands whose help has no examples: groups of commands and cobra's.
	groups := []string{"cairn_backend", "cairn_backends", "cairn_completion", "cairn_completion_bash",
		"cairn_completion_fish", "cairn_completion_powershell", "cairn_completion_zsh", "cairn_policy",
		"cairn_proposals", "cairn_stack", "cairn_tf"}
	for _, page := range without {
		if !slices.Contains(groups, page) {
			t.Errorf("%s --help has no Examples", strings.ReplaceAll(page, "_", " "))
		}
	}

	notRun := map[string]string{
		"cairn backend file --dir ./values --listen 127.0.0.1:5051":                                            "serves until stopped",
		"cairn backend file --dir ./values --listen 127.0.0.1:5051 &":                                          "serves until stopped",
		"cairn backends check files":                                                                           "needs the file backend serving",
		"cairn backends check files     # 1 interrupted write waits for recovery":                              "needs the file backend serving",
		"cairn backends rotate-keys secrets-repo --add-age age1new... --remove-age age1old...":                 "needs a Git backend with SOPS keys",
		"cairn backup --database \"$CAIRN_DATABASE\" --to - | gzip > cairn.bak.gz":                             "needs PostgreSQL",
		"cairn restore --database \"$CAIRN_DATABASE\" --from cairn.bak --force":                                "needs PostgreSQL",
		"cairn migrate --database 'postgres://cairn:secret@db:5432/cairn?sslmode=require'":                     "needs PostgreSQL",
		"cairn migrate --encryption-config /etc/cairn/encryption.yaml --reencrypt":                             "needs an encryption configuration (TestMigrateReencrypt)",
		"cairn config set-context prod --server https://cairn.example.com:8443 --certificate-authority ca.crt": "needs a CA file",
		"cairn login --token \"$(cat ~/.local/share/cairn/admin.token)\"":                                      "needs a cairn serve's admin token",
		"cairn get terraformoutput.default.network-ip -o yaml":                                                 "needs a state written by tofu",
		"cairn tf diff network 2 5":                                                                            "needs a state written by tofu",
		"cairn tf history network":                                                                             "needs a state written by tofu",
		"cairn get flags -w":                                                                                   "watches until interrupted",
		"cairn render file:///srv/git/stacks.git@v0.1.0//minimal-gcp -f installation.yaml":                     "needs a Git repository",
		"cairn stack add minimal-gcp-0.1.0.tgz":                                                                "needs a packed stack",
		"cairn stack add https://github.com/org/stacks.git@v0.1.0//minimal-gcp":                                "needs the network",
		"cairn serve": "serves until stopped",
		"cairn serve --addr 0.0.0.0:8080 --data-dir /var/lib/cairn":                          "serves until stopped",
		"cairn serve --addr 0.0.0.0:8080 --database 'postgres://cairn:secret@db:5432/cairn'": "serves until stopped",
		"kubectl --server http://127.0.0.1:8080 api-resources":                               "kubectl",
		"cairn trace minimalgcp/small-infra":                                                 "needs an installation whose resources a cluster serves",
		"cairn trace minimalgcps/small-infra -n team-a -o json":                              "needs an installation whose resources a cluster serves",
		"cairn backend gotemplate --listen 127.0.0.1:5052 --server http://127.0.0.1:8080":    "serves until stopped",
		"cairn proposals list":                                      "needs a Git backend in propose mode (TestProposals)",
		"cairn proposals show 3f9c0a1b2d4e":                         "needs a Git backend in propose mode (TestProposals)",
		"cairn proposals merge 3f9c0a1b2d4e":                        "needs a Git backend in propose mode (TestProposals)",
		"cairn proposals close 3f9c0a1b2d4e":                        "needs a Git backend in propose mode (TestProposals)",
		"cairn install team-portal -p team=data --name data-portal": "waits for a stack controller (TestInstall)",
	}
	// What an example assumes is there, run before it.
	before := map[string][][]string{
		"cairn create -f examples/flags/new-project.yaml":                                      {{"delete", "flag", "new-project"}},
		"cairn unlock " + placeholderID + " --owner deploy-42":                                 {{"lock", placeholderID, "--owner", "deploy-42"}},
		"cairn unlock flag/new-project --owner deploy-42":                                      {{"lock", "flag/new-project", "--owner", "deploy-42"}},
		"cairn update " + placeholderID + " --value-file - --owner deploy-42 < db-config.yaml": {{"lock", placeholderID, "--owner", "deploy-42"}},
		"cairn delete ti " + placeholderID + " --lock-owner deploy-42":                         {{"lock", placeholderID, "--owner", "deploy-42"}},
		"cairn types delete cap.type.database.postgresql.config:0.1.0":                         {{"delete", "ti", placeholderID}},
		"cairn backends register --url grpc://127.0.0.1:5051 --accept-value --alias files":     {{"delete", "ti", "files"}},
		"cairn stack show minimal-gcp":                                                         {{"stack", "add", "examples/stacks/minimal-gcp"}},
		"cairn stack show sql-env":                                                             {{"stack", "add", "examples/stacks/sql-env"}},
		"cairn plan team-portal -p team=data --name data-portal":                               {{"stack", "add", "examples/stacks/flags-env"}, {"stack", "add", "examples/stacks/team-portal"}},
		"cairn plan reporting -p team=data --dependency sqlserver=SharedSQLServer/office-sql -o json": {
			{"stack", "add", "examples/dependencies/shared-sql-server"}, {"stack", "add", "examples/dependencies/reporting"},
			{"apply", "-f", "office-sql.yaml"}},
		"cairn --data-dir /var/lib/cairn-new restore --from cairn-2026-11-23.bak": {{"backup", "--to", "cairn-2026-11-23.bak"}},
	}
	// Commands of this machine: they run in local mode only.
	machine := []string{"backup", "restore", "migrate", "render", "version", "config", "login", "completion"}

	newProject, err := os.ReadFile(filepath.Join("../../examples/flags/new-project.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(t)
	dir := t.TempDir()
	files := map[string]string{
		"flag.yaml":         string(newProject),
		"db-config.yaml":    "{defaultDBName: billing, host: db.example.com, port: 5433, superuser: {username: billing, password: change-me-too}}\n",
		"params.yaml":       "{region: us-west1, projectID: my-project}\n",
		"helm-context.json": `{"type": "object"}`,
		"token.txt":         "example-token\n",
		"office-sql.yaml":   "apiVersion: examples.stacks.cairn.dev/v1alpha1\nkind: SharedSQLServer\nmetadata: {name: office-sql}\nspec: {connectionString: x}\n",
		"policy.yaml":       "typeInstance: {rules: [{typeRef: {path: cap.type.aws.*}, backend: {id: files}}, {typeRef: {path: cap.*}, backend: {id: cairn-builtin}}]}\n",
	}
	for name, content := range files {
		writeFile(t, dir, name, content)
	}
	// The client configuration of config and login examples, apart, so
	// that a context they make current does not move the others.
	more := map[string]string{cli.EnvEditor: "true", cli.EnvConfig: filepath.Join(dir, "config.yaml")}
	local := map[string]string{cli.EnvEditor: "true"}
	// The local store of the machine's commands.
	if r := s.runCtx(t.Context(), nil, more, "", "migrate"); r.code != 0 {
		t.Fatalf("migrate: %s", r.stderr)
	}
	s.ok("backends", "register", "--url", "grpc://127.0.0.1:5051", "--accept-value", "--alias", "files")

	var id string
	// run runs one command line of an example; a failure is an error.
	run := func(ex helpExample, args []string, stdin, stdout string) {
		t.Helper()
		for i, a := range args {
			switch {
			case strings.HasPrefix(a, "examples/"):
				args[i] = "../../" + a
			case a == placeholderID:
				args[i] = id
			case a == "http://127.0.0.1:8080" && i == 1 && args[0] == "--server":
				args[i] = s.url // "" in local mode: --server='' is local mode
			case a == "/var/lib/cairn-new":
				args[i] = filepath.Join(dir, "cairn-new")
			case files[a] != "" || strings.HasSuffix(a, ".bak"):
				args[i] = filepath.Join(dir, a)
			}
		}
		cmd := ""
		for _, a := range args {
			if !strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "/") {
				cmd = a
				break
			}
		}
		var r result
		switch {
		case slices.Contains(machine, cmd) || (len(args) > 1 && args[0] == "backends" && args[1] == "recover"):
			r = s.runCtx(t.Context(), nil, more, stdin, args...)
		default:
			r = s.runCtx(t.Context(), nil, local, stdin, s.args(args...)...)
		}
		if r.code != 0 {
			t.Errorf("%s: %s\n(run as cairn %s)\nexit %d\nstderr: %s", ex.page, ex.line, strings.Join(args, " "), r.code, r.stderr)
		}
		if stdout != "" {
			writeFile(t, dir, stdout, r.stdout)
		}
	}
	// Examples start from the quickstart and the flags, brought back
	// after one that deletes or locks them.
	reset := func() {
		for _, locked := range []string{"postgresconfig/db-config", "flag/new-project"} {
			s.run("", "unlock", locked, "--owner", "deploy-42")
		}
		s.ok("apply", "-f", "../../examples/quickstart", "-f", "../../examples/flags/flags.json", "-f", "../../examples/flags/new-project.yaml")
		id = s.byName(configType, "db-config").ID
	}
	reset()
	changes := []string{"create", "delete", "lock", "update", "types"}
	today := time.Now().Format("2006-01-02")
	dirty := false
	for _, ex := range examples {
		if notRun[ex.line] != "" {
			continue
		}
		args, stdin, stdout, ok := shellWords(strings.ReplaceAll(ex.line, "$(date +%F)", today), dir)
		if !ok || len(args) == 0 {
			t.Errorf("%s: %q: a shell line this test cannot run; run it another way or say why in notRun", ex.page, ex.line)
			continue
		}
		if dirty {
			reset()
		}
		dirty = slices.Contains(changes, args[0]) || before[ex.line] != nil
		for _, args := range before[ex.line] {
			run(helpExample{ex.page, "(before) " + strings.Join(args, " ")}, slices.Clone(args), "", "")
		}
		run(ex, args, stdin, stdout)
	}
}

// shellWords reads the few shell forms of the examples: words in quotes,
// "cat FILE |" or "echo 'TEXT' |" before the command, "< FILE" and
// "> FILE" after it, VAR=VALUE before it (dropped: the test sets the
// editor). It returns cairn's arguments, its standard input and the file
// of dir its output goes to; ok is false for anything else.
func shellWords(line, dir string) (args []string, stdin, stdout string, ok bool) {
	var words []string
	for _, m := range regexp.MustCompile(`'[^']*'|"[^"$]*"|[^\s'"]+`).FindAllString(line, -1) {
		if strings.ContainsAny(m, "$`;&") && !strings.HasPrefix(m, "'") {
			return nil, "", "", false
		}
		words = append(words, m)
	}
	unquote := func(w string) string {
		if len(w) >= 2 && (w[0] == '\'' || w[0] == '"') {
			return w[1 : len(w)-1]
		}
		return w
	}
	if i := slices.Index(words, "|"); i >= 0 {
		switch {
		case i == 2 && words[0] == "cat":
			b, err := os.ReadFile(filepath.Join(dir, words[1]))
			if err != nil {
				return nil, "", "", false
			}
			stdin = string(b)
		case i == 2 && words[0] == "echo":
			stdin = unquote(words[1]) + "\n"
		default:
			return nil, "", "", false
		}
		words = words[i+1:]
	}
	for len(words) > 0 && regexp.MustCompile(`^[A-Z_]+=`).MatchString(words[0]) {
		words = words[1:]
	}
	if len(words) == 0 || words[0] != "cairn" {
		return nil, "", "", false
	}
	for i := 1; i < len(words); i++ {
		switch w := words[i]; w {
		case "<", ">":
			if i+1 >= len(words) {
				return nil, "", "", false
			}
			if w == "<" {
				b, err := os.ReadFile(filepath.Join(dir, words[i+1]))
				if err != nil {
					return nil, "", "", false
				}
				stdin = string(b)
			} else {
				stdout = words[i+1]
			}
			i++
		case "|", "&":
			return nil, "", "", false
		default:
			args = append(args, unquote(w))
		}
	}
	return args, stdin, stdout, true
}
