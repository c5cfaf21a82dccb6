package s3_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/cairn-dev/cairn"
	"github.com/cairn-dev/cairn/backend/s3"
	"github.com/cairn-dev/cairn/backend/s3/s3test"
)

func TestParseConfig(t *testing.T) {
	tests := []struct {
		name, value, err string
	}{
		{"minimal", `{"url":"https://s3.example.com","acceptValue":true,"bucket":"b"}`, ""},
		{"everything", `{"url":"http://127.0.0.1:7070","acceptValue":true,"contextSchema":null,"bucket":"b","prefix":"p","region":"eu-west-1","addressing":"virtual",
			"credentials":{"file":"/etc/aws","profile":"x"},"tls":{"caFile":"/ca.pem"}}`, ""},
		{"no url", `{"acceptValue":true,"bucket":"b"}`, "url is required"},
		{"another scheme", `{"url":"s3://b","acceptValue":true,"bucket":"b"}`, "the scheme must be https"},
		{"a path in the url", `{"url":"https://h/bucket","acceptValue":true,"bucket":"b"}`, "must be just scheme://host[:port]"},
		{"keys in the url", `{"url":"https://AK:SK@h","acceptValue":true,"bucket":"b"}`, "url must not carry credentials"},
		{"acceptValue false", `{"url":"https://h","acceptValue":false,"bucket":"b"}`, "acceptValue must be true"},
		{"a context schema", `{"url":"https://h","acceptValue":true,"bucket":"b","contextSchema":{}}`, "contextSchema must be null"},
		{"no bucket", `{"url":"https://h","acceptValue":true}`, "bucket is required"},
		{"bad addressing", `{"url":"https://h","acceptValue":true,"bucket":"b","addressing":"dns"}`, `addressing "dns"`},
		{"profile without file", `{"url":"https://h","acceptValue":true,"bucket":"b","credentials":{"profile":"x"}}`, "profile needs credentials.file"},
		{"keys in the value", `{"url":"https://h","acceptValue":true,"bucket":"b","secretAccessKey":"SK"}`, `unknown field "secretAccessKey"`},
		{"two problems", `{"url":"","acceptValue":true}`, "url is required (the endpoint, e.g. https://s3.eu-west-1.amazonaws.com); bucket is required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := s3.ParseConfig(json.RawMessage(tt.value))
			if tt.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				if c.Region == "" || (c.Prefix != "" && !strings.HasSuffix(c.Prefix, "/")) {
					t.Errorf("defaults not applied: %+v", c)
				}
				return
			}
			if !cairn.HasCode(err, cairn.CodeInvalid) || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("err = %v, want Invalid containing %q", err, tt.err)
			}
			if strings.Contains(tt.value, "SK") && strings.Contains(err.Error(), "SK@") {
				t.Errorf("the error repeats a secret: %v", err)
			}
		})
	}
}

func TestCredentials(t *testing.T) {
	srv := s3test.Start(t)
	srv.Bucket(t, "creds")
	file := filepath.Join(t.TempDir(), "credentials")
	if err := os.WriteFile(file, []byte("[cairn]\naws_access_key_id = "+srv.AccessKey+"\naws_secret_access_key = "+srv.SecretKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := s3.Config{URL: srv.Endpoint, Bucket: "creds", Region: srv.Region, Addressing: "path"}
	write := func(b *s3.Backend) error {
		_, err := b.OnCreate(t.Context(), cairn.OnCreateRequest{InstanceID: uuid.NewString(), Value: json.RawMessage(`{"a":1}`)})
		return err
	}

	t.Run("from a credentials file and profile", func(t *testing.T) {
		c := base
		c.Credentials = s3.Credentials{File: file, Profile: "cairn"}
		b, err := s3.New(s3.Options{Config: c, Getenv: func(string) string { return "" }})
		if err != nil {
			t.Fatal(err)
		}
		if err := write(b); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("from named environment variables", func(t *testing.T) {
		c := base
		c.Credentials = s3.Credentials{AccessKeyIDEnv: "MY_KEY", SecretAccessKeyEnv: "MY_SECRET"}
		env := map[string]string{"MY_KEY": srv.AccessKey, "MY_SECRET": srv.SecretKey}
		b, err := s3.New(s3.Options{Config: c, Getenv: func(k string) string { return env[k] }})
		if err != nil {
			t.Fatal(err)
		}
		if err := write(b); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("none", func(t *testing.T) {
		_, err := s3.New(s3.Options{Config: base, Getenv: func(string) string { return "" }})
		if !cairn.HasCode(err, cairn.CodeUnavailable) || !strings.Contains(err.Error(), "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("wrong secret", func(t *testing.T) {
		env := map[string]string{"AWS_ACCESS_KEY_ID": srv.AccessKey, "AWS_SECRET_ACCESS_KEY": "wrong-secret-value"}
		b, err := s3.New(s3.Options{Config: base, Getenv: func(k string) string { return env[k] }})
		if err != nil {
			t.Fatal(err)
		}
		err = write(b)
		if !cairn.HasCode(err, cairn.CodeUnavailable) || strings.Contains(err.Error(), "wrong-secret-value") {
			t.Fatalf("err = %v: want Unavailable, without the secret", err)
		}
	})
	t.Run("missing bucket", func(t *testing.T) {
		c := base
		c.Bucket = "nope"
		env := map[string]string{"AWS_ACCESS_KEY_ID": srv.AccessKey, "AWS_SECRET_ACCESS_KEY": srv.SecretKey}
		b, err := s3.New(s3.Options{Config: c, Getenv: func(k string) string { return env[k] }})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Check(t.Context()); err == nil || !strings.Contains(err.Error(), `bucket "nope" does not exist`) {
			t.Errorf("Check = %v", err)
		}
		if err := write(b); !cairn.HasCode(err, cairn.CodeUnavailable) || !strings.Contains(err.Error(), "bucket") {
			t.Errorf("write to a missing bucket: %v", err)
		}
	})
}

func TestTLS(t *testing.T) {
	srv := s3test.StartTLS(t)
	env := map[string]string{"AWS_ACCESS_KEY_ID": srv.AccessKey, "AWS_SECRET_ACCESS_KEY": srv.SecretKey}
	getenv := func(k string) string { return env[k] }
	cfg := s3.Config{URL: srv.Endpoint, Bucket: "secure", Region: srv.Region, Addressing: "path", TLS: s3.TLS{CAFile: srv.CAFile}}
	b, err := s3.New(s3.Options{Config: cfg, Getenv: getenv})
	if err != nil {
		t.Fatal(err)
	}
	if !b.TLS() {
		t.Error("TLS() = false for an https endpoint")
	}
	// Without the CA the server's certificate is not trusted.
	untrusted := cfg
	untrusted.TLS = s3.TLS{}
	ub, err := s3.New(s3.Options{Config: untrusted, Getenv: getenv})
	if err != nil {
		t.Fatal(err)
	}
	if err := ub.Check(t.Context()); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("an untrusted certificate was accepted: %v", err)
	}
	// With it: create the bucket through the same TLS endpoint, then pass the suite's basics.
	if err := b.Check(t.Context()); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("Check before the bucket exists: %v", err)
	}
	srv.Bucket(t, "secure")
	if err := b.Check(t.Context()); err != nil {
		t.Fatal(err)
	}
	id := uuid.NewString()
	if _, err := b.OnCreate(t.Context(), cairn.OnCreateRequest{InstanceID: id, Value: json.RawMessage(`{"tls":true}`)}); err != nil {
		t.Fatal(err)
	}
	v, err := b.GetValue(t.Context(), cairn.GetValueRequest{InstanceID: id, ResourceVersion: 1})
	if err != nil || string(v) != `{"tls":true}` {
		t.Fatalf("GetValue over TLS = %s, %v", v, err)
	}
	for _, bad := range []string{"/nonexistent/ca.pem", writeTemp(t, "not a certificate")} {
		c := cfg
		c.TLS.CAFile = bad
		if _, err := s3.New(s3.Options{Config: c, Getenv: getenv}); !cairn.HasCode(err, cairn.CodeInvalid) || !strings.Contains(err.Error(), "tls.caFile") {
			t.Errorf("caFile %s: %v", bad, err)
		}
	}
}

func writeTemp(t *testing.T, content string) string {
	p := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
