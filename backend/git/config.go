package git

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/backend/controller/template"
	"github.com/cairn-dev/cairn/backend/scm"
	"github.com/cairn-dev/cairn/backend/sops"
)

// TypePath is the Type of Git backend instances: the hub's opener runs every
// backend instance of this Type in-process (Opener).
const TypePath = cairn.StorageTypePrefix + ".git"

// TypeSchema is the JSON Schema of Git backend instances' values: the
// storage schema's url, acceptValue and contextSchema plus the backend's
// own settings (ParseConfig checks them in depth).
const TypeSchema = `{
  "$schema": "http://json-schema.org/draft-07/schema",
  "type": "object",
  "required": ["url", "acceptValue", "contextSchema"],
  "properties": {
    "url": {"type": "string", "description": "the repository: file://, http(s):// or ssh://"},
    "acceptValue": {"const": true},
    "contextSchema": {"type": ["object", "null"]},
    "branch": {"type": "string"},
    "mode": {"enum": ["commit", "propose"]},
    "scm": {"type": "object"},
    "paths": {"type": "object"},
    "author": {"type": "object", "properties": {"name": {"type": "string"}, "email": {"type": "string"}}},
    "credentials": {"type": "object"},
    "controller": {"type": "object"},
    "groupCommit": {"type": "boolean"},
    "encryption": {"type": "object", "properties": {"sops": {"type": "object"}}}
  }
}`

// StorageType is the Type of Git backend instances, for hubs to register
// so that strict mode accepts them.
func StorageType() cairn.Type {
	return cairn.Type{Path: TypePath, Revision: cairn.CoreRevision, JSONSchema: json.RawMessage(TypeSchema),
		AdditionalRefs: []string{cairn.StorageTypePrefix}}
}

// Modes of a Git backend.
const (
	ModeCommit  = "commit"
	ModePropose = "propose"
)

// ContextSchema is the contextSchema a Git backend instance declares. The
// hub passes the instance's identity itself (cairn.ResourceMeta), so a
// caller gives no context; what the backend returns per resource version
// (the resource's identity, its file and the commit that made it) is kept
// by the hub as that version's context, which `cairn describe` shows.
const ContextSchema = `{
  "type": "object",
  "properties": {
    "apiVersion": {"type": "string"},
    "kind": {"type": "string"},
    "namespace": {"type": "string"},
    "name": {"type": "string"},
    "path": {"type": "string"},
    "resourceVersion": {"type": "integer"},
    "commit": {"type": "string"},
    "proposal": {
      "type": "object",
      "properties": {
        "id": {"type": "string"},
        "provider": {"type": "string"},
        "number": {"type": "integer"},
        "url": {"type": "string"},
        "branch": {"type": "string"},
        "base": {"type": "string"}
      }
    }
  }
}`

// Config is a Git backend instance's value, beside the storage schema's
// url, acceptValue (true) and contextSchema (ContextSchema).
type Config struct {
	// URL is the repository: file://, http(s):// or ssh://.
	URL string `json:"url"`
	// Branch receives the commits. Default "main".
	Branch string `json:"branch,omitempty"`
	// Mode is "commit" (default): push to Branch; or "propose": push each
	// change to a branch cairn/proposal/<id> and open a pull request into
	// Branch through SCM (see propose.go).
	Mode string `json:"mode,omitempty"`
	// SCM is the provider that opens pull requests; required by propose.
	SCM *scm.Config `json:"scm,omitempty"`
	// Paths are the template controller's path templates (cup's defaults).
	Paths template.Paths `json:"paths,omitempty"`
	// Author signs the commits. Default cairn <cairn@localhost>.
	Author Author `json:"author,omitempty"`
	// Credentials name where secrets are, never the secrets themselves.
	Credentials Credentials `json:"credentials,omitempty"`
	// Controller chooses a WASM controller instead of the template
	// controller (OpenerConfig.Controller loads it).
	Controller *ControllerRef `json:"controller,omitempty"`
	// GroupCommit writes concurrent writes that queued behind one commit
	// together as the next commit (group.go). Default false: one commit
	// per write.
	GroupCommit bool `json:"groupCommit,omitempty"`
	// Encryption encrypts every resource file the backend writes.
	Encryption *Encryption `json:"encryption,omitempty"`
}

// Encryption chooses how resource files are encrypted in the repository.
type Encryption struct {
	// SOPS writes files the sops tool reads and writes (backend/sops).
	SOPS *sops.Config `json:"sops,omitempty"`
}

// ControllerRef names the controller of a Git backend.
type ControllerRef struct {
	WASM *WASMRef `json:"wasm,omitempty"`
}

// WASMRef is a WASI module speaking cup's controller protocol: a file on
// the hub's machine, pinned by its SHA-256 when given.
type WASMRef struct {
	Module string `json:"module"`
	SHA256 string `json:"sha256,omitempty"`
}

// Author is a commit signature.
type Author struct {
	Name  string `json:"name,omitempty"`
	Email string `json:"email,omitempty"`
}

// Credentials reference a token (HTTP basic auth, as GitHub, GitLab and
// Gitea take it) or an SSH key by environment variable or file name.
type Credentials struct {
	// Username goes with the token. Default "git".
	Username  string `json:"username,omitempty"`
	TokenEnv  string `json:"tokenEnv,omitempty"`
	TokenFile string `json:"tokenFile,omitempty"`
	// SSHKeyEnv or SSHKeyFile hold a PEM private key; SSHUser defaults to
	// the URL's user, else "git". SSHKnownHostsFile defaults to
	// ~/.ssh/known_hosts; host keys are always checked.
	SSHKeyEnv         string `json:"sshKeyEnv,omitempty"`
	SSHKeyFile        string `json:"sshKeyFile,omitempty"`
	SSHUser           string `json:"sshUser,omitempty"`
	SSHKnownHostsFile string `json:"sshKnownHostsFile,omitempty"`
}

// ParseConfig decodes and checks a backend instance's value.
func ParseConfig(value json.RawMessage) (Config, error) {
	var c Config
	if err := json.Unmarshal(value, &c); err != nil {
		return c, cairn.Errorf(cairn.CodeInvalid, "git backend: value: %w", err)
	}
	if e := c.Encryption; e != nil {
		if e.SOPS == nil {
			return c, cairn.Errorf(cairn.CodeInvalid, "git backend: encryption: give sops: {age: [RECIPIENT...]}")
		}
		if err := e.SOPS.Check(); err != nil {
			return c, cairn.Errorf(cairn.CodeInvalid, "git backend: %w", err)
		}
		if c.Controller != nil {
			return c, cairn.Errorf(cairn.CodeInvalid, "git backend: encryption works with the template controller only, not with controller.wasm")
		}
	}
	if c.Branch == "" {
		c.Branch = "main"
	}
	if c.Mode == "" {
		c.Mode = ModeCommit
	}
	if c.Author.Name == "" {
		c.Author.Name = "cairn"
	}
	if c.Author.Email == "" {
		c.Author.Email = "cairn@localhost"
	}
	switch c.Mode {
	case ModeCommit:
	case ModePropose:
		if c.SCM == nil {
			return c, cairn.Errorf(cairn.CodeInvalid, "git backend: mode %q needs scm: {provider: github|gitlab|gitea, apiURL, repository, tokenEnv}", c.Mode)
		}
		if err := c.SCM.Check(); err != nil {
			return c, cairn.Errorf(cairn.CodeInvalid, "git backend: %w", err)
		}
	default:
		return c, cairn.Errorf(cairn.CodeInvalid, "git backend: mode %q: want %q or %q", c.Mode, ModeCommit, ModePropose)
	}
	u, err := url.Parse(c.URL)
	if err != nil || c.URL == "" {
		return c, cairn.Errorf(cairn.CodeInvalid, "git backend: url %q: want file://, http(s):// or ssh://", redactURL(c.URL))
	}
	switch u.Scheme {
	case "file", "http", "https", "ssh":
	default:
		return c, cairn.Errorf(cairn.CodeInvalid, "git backend: url %q: want file://, http(s):// or ssh://", u.Redacted())
	}
	if _, ok := u.User.Password(); ok {
		// The url is part of the backend's value, which every viewer
		// reads, and of errors and logs.
		return c, cairn.Errorf(cairn.CodeInvalid, "git backend: url %q: the url holds a password: give it as credentials.tokenEnv or credentials.tokenFile (the url is readable by every viewer of backends)", u.Redacted())
	}
	if strings.ContainsAny(c.Branch, " ~^:?*[\\") || strings.Contains(c.Branch, "..") {
		return c, cairn.Errorf(cairn.CodeInvalid, "git backend: branch %q is not a valid branch name", c.Branch)
	}
	// Checked here rather than at the first write, so the hub refuses a
	// backend instance that could store nothing.
	if _, err := template.New(c.Paths); err != nil {
		return c, cairn.Errorf(cairn.CodeInvalid, "git backend: %w", err)
	}
	if ctl := c.Controller; ctl != nil {
		switch w := ctl.WASM; {
		case w == nil:
			return c, cairn.Errorf(cairn.CodeInvalid, "git backend: controller: give wasm: {module: PATH, sha256: HEX}, or leave controller out for the template controller")
		case strings.TrimSpace(w.Module) == "":
			return c, cairn.Errorf(cairn.CodeInvalid, "git backend: controller.wasm.module: the module's file is required")
		case w.SHA256 != "" && !isSHA256(w.SHA256):
			return c, cairn.Errorf(cairn.CodeInvalid, "git backend: controller.wasm.sha256 %q: want 64 hexadecimal digits (sha256sum of the module)", w.SHA256)
		}
	}
	return c, nil
}

func isSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// auth resolves the credentials. Errors name the variable or file, never
// its content.
func (c Config) auth(getenv func(string) string) (transport.AuthMethod, error) {
	cr := c.Credentials
	u, _ := url.Parse(c.URL)
	secret := func(env, file, what string) (string, error) {
		if env != "" {
			v := getenv(env)
			if v == "" {
				return "", fmt.Errorf("git backend: %s: environment variable %s is empty or unset", what, env)
			}
			return v, nil
		}
		if file != "" {
			b, err := os.ReadFile(file)
			if err != nil {
				return "", fmt.Errorf("git backend: %s: %w", what, err)
			}
			return strings.TrimRight(string(b), "\r\n"), nil
		}
		return "", nil
	}
	switch u.Scheme {
	case "http", "https":
		tok, err := secret(cr.TokenEnv, cr.TokenFile, "token")
		if err != nil || tok == "" {
			return nil, err
		}
		user := cr.Username
		if user == "" {
			user = "git"
		}
		return &githttp.BasicAuth{Username: user, Password: tok}, nil
	case "ssh":
		key, err := secret(cr.SSHKeyEnv, cr.SSHKeyFile, "SSH key")
		if err != nil || key == "" {
			return nil, err
		}
		user := cr.SSHUser
		if user == "" && u.User != nil {
			user = u.User.Username()
		}
		if user == "" {
			user = "git"
		}
		pk, err := gitssh.NewPublicKeys(user, []byte(key), "")
		if err != nil {
			return nil, fmt.Errorf("git backend: SSH key: %w", err)
		}
		if cr.SSHKnownHostsFile != "" {
			cb, err := knownhosts.New(cr.SSHKnownHostsFile)
			if err != nil {
				return nil, fmt.Errorf("git backend: known hosts: %w", err)
			}
			pk.HostKeyCallback = cb
		}
		return pk, nil
	}
	return nil, nil
}

// redactURL hides the password of a URL that does not parse: what is
// between "scheme://user:" and the last "@" before the path.
func redactURL(s string) string {
	_, rest, ok := strings.Cut(s, "://")
	if !ok {
		return s
	}
	start := len(s) - len(rest)
	auth, _, _ := strings.Cut(rest, "/")
	at := strings.LastIndex(auth, "@")
	if at < 0 {
		return s
	}
	colon := strings.Index(auth[:at], ":")
	if colon < 0 {
		return s
	}
	return s[:start+colon+1] + "xxxxx" + s[start+at:]
}
