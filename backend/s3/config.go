package s3

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/cairn-dev/cairn"
)

// TypePath is the Type of S3 backend instances: the hub's opener runs every
// backend instance of this Type in-process (Opener).
const TypePath = cairn.StorageTypePrefix + ".s3"

// TypeSchema is the JSON Schema of S3 backend instances' values: the storage
// schema's url, acceptValue and contextSchema plus the bucket settings
// (ParseConfig checks them in depth).
const TypeSchema = `{
  "$schema": "http://json-schema.org/draft-07/schema",
  "type": "object",
  "required": ["url", "acceptValue", "bucket"],
  "properties": {
    "url": {"type": "string", "description": "the S3 endpoint: https://host[:port] (http:// only for loopback tests)"},
    "acceptValue": {"const": true},
    "contextSchema": {"type": "null"},
    "bucket": {"type": "string"},
    "prefix": {"type": "string"},
    "region": {"type": "string"},
    "addressing": {"enum": ["auto", "path", "virtual"]},
    "credentials": {"type": "object"},
    "tls": {"type": "object"}
  }
}`

// StorageType is the Type of S3 backend instances, for hubs to register so
// that strict mode accepts them.
func StorageType() cairn.Type {
	return cairn.Type{Path: TypePath, Revision: cairn.CoreRevision, JSONSchema: json.RawMessage(TypeSchema),
		AdditionalRefs: []string{cairn.StorageTypePrefix}}
}

// Config is an S3 backend instance's value, beside the storage schema's
// acceptValue (true) and contextSchema (null).
type Config struct {
	// URL is the endpoint, https://host[:port]; http:// is plaintext.
	URL string `json:"url"`
	// Bucket holds the values; it must exist.
	Bucket string `json:"bucket"`
	// Prefix is put before every object key ("cairn/" keeps cairn's
	// objects apart from others in a shared bucket).
	Prefix string `json:"prefix,omitempty"`
	// Region is the bucket's region; default us-east-1.
	Region string `json:"region,omitempty"`
	// Addressing is "path" (https://host/bucket/key), "virtual"
	// (https://bucket.host/key) or "auto" (default: virtual-hosted for AWS,
	// path-style elsewhere).
	Addressing string `json:"addressing,omitempty"`
	// Credentials say where the keys are, never the keys themselves.
	Credentials Credentials `json:"credentials,omitempty"`
	// TLS configures the connection to an https endpoint.
	TLS TLS `json:"tls,omitempty"`
}

// Credentials name where the access keys are: environment variables of
// the hub's process (default AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
// AWS_SESSION_TOKEN), or an AWS shared credentials file and profile.
type Credentials struct {
	AccessKeyIDEnv     string `json:"accessKeyIDEnv,omitempty"`
	SecretAccessKeyEnv string `json:"secretAccessKeyEnv,omitempty"`
	SessionTokenEnv    string `json:"sessionTokenEnv,omitempty"`
	File               string `json:"file,omitempty"`
	Profile            string `json:"profile,omitempty"`
}

// TLS configures the connection: CAFile adds certificate authorities (PEM)
// to the system's.
type TLS struct {
	CAFile string `json:"caFile,omitempty"`
}

// ParseConfig reads and checks a backend instance's value.
func ParseConfig(value json.RawMessage) (Config, error) {
	var c Config
	var all struct {
		Config
		AcceptValue   *bool           `json:"acceptValue"`
		ContextSchema json.RawMessage `json:"contextSchema"`
	}
	dec := json.NewDecoder(bytes.NewReader(value))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&all); err != nil {
		return c, cairn.Errorf(cairn.CodeInvalid, "s3 backend: its value: %v", err)
	}
	c = all.Config
	var problems []string
	u, err := url.Parse(c.URL)
	switch {
	case c.URL == "":
		problems = append(problems, "url is required (the endpoint, e.g. https://s3.eu-west-1.amazonaws.com)")
	case err != nil:
		problems = append(problems, "url is not a valid URL (https://host[:port])")
	case u.User != nil:
		// Never repeat it: the user info may be keys.
		problems = append(problems, "url must not carry credentials: name where they are in credentials")
	case u.Scheme != "https" && u.Scheme != "http":
		problems = append(problems, fmt.Sprintf("url %q: the scheme must be https (or http)", c.URL))
	case u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "":
		problems = append(problems, fmt.Sprintf("url %q must be just scheme://host[:port]", c.URL))
	}
	if all.AcceptValue == nil || !*all.AcceptValue {
		problems = append(problems, "acceptValue must be true (the backend stores values)")
	}
	if len(all.ContextSchema) > 0 && strings.TrimSpace(string(all.ContextSchema)) != "null" {
		problems = append(problems, "contextSchema must be null (the backend takes no context)")
	}
	if c.Bucket == "" {
		problems = append(problems, "bucket is required")
	}
	switch c.Addressing {
	case "", "auto", "path", "virtual":
	default:
		problems = append(problems, fmt.Sprintf("addressing %q: must be auto, path or virtual", c.Addressing))
	}
	if c.Credentials.File == "" && c.Credentials.Profile != "" {
		problems = append(problems, "credentials.profile needs credentials.file")
	}
	if c.Credentials.File != "" && (c.Credentials.AccessKeyIDEnv != "" || c.Credentials.SecretAccessKeyEnv != "") {
		problems = append(problems, "credentials: give either file or environment variables, not both")
	}
	if len(problems) > 0 {
		return c, cairn.Errorf(cairn.CodeInvalid, "s3 backend: %s", strings.Join(problems, "; "))
	}
	if c.Prefix != "" && !strings.HasSuffix(c.Prefix, "/") {
		c.Prefix += "/"
	}
	if c.Region == "" {
		c.Region = "us-east-1"
	}
	return c, nil
}
