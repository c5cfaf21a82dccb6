// Package s3 is a storage backend driver keeping instance values in an
// S3-compatible bucket: one object per resource version,
// <prefix><instance id>/<resource version>.json, and one marker object per
// instance, <prefix><instance id>/lock, whose content is the lock owner
// ("" when unlocked). The marker exists exactly while the instance does.
//
// Writes that must not race use S3 conditional requests: a new resource
// version and a new marker are written with If-None-Match: *, and the
// marker is changed with If-Match on the ETag read, so several hub replicas
// may share a bucket. Credentials come from the hub's environment or a file
// the backend's value names; they are never stored in the hub.
package s3

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/cairn-dev/cairn"
)

// Options configures a Backend.
type Options struct {
	Config Config
	// Getenv reads the credentials' environment variables. Default os.Getenv.
	Getenv func(string) string
	// Transport overrides the HTTP transport (tests). Nil: one built from
	// Config.TLS.
	Transport http.RoundTripper
}

// Backend is the driver. It is safe for concurrent use.
type Backend struct {
	cfg    Config
	client *minio.Client
}

var _ cairn.Backend = (*Backend)(nil)

// New returns a Backend for cfg. It does not contact the endpoint.
func New(opts Options) (*Backend, error) {
	cfg := opts.Config
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, cairn.Errorf(cairn.CodeInvalid, "s3 backend: url is not a valid URL (https://host[:port])")
	}
	creds, err := credentialsOf(cfg.Credentials, getenv)
	if err != nil {
		return nil, err
	}
	tr := opts.Transport
	if tr == nil && u.Scheme == "https" {
		if tr, err = transport(cfg.TLS); err != nil {
			return nil, err
		}
	}
	lookup := minio.BucketLookupAuto
	switch cfg.Addressing {
	case "path":
		lookup = minio.BucketLookupPath
	case "virtual":
		lookup = minio.BucketLookupDNS
	}
	client, err := minio.New(u.Host, &minio.Options{
		Creds: creds, Secure: u.Scheme == "https", Region: cfg.Region, BucketLookup: lookup, Transport: tr,
	})
	if err != nil {
		return nil, cairn.Errorf(cairn.CodeInvalid, "s3 backend: %v", err)
	}
	return &Backend{cfg: cfg, client: client}, nil
}

func credentialsOf(c Credentials, getenv func(string) string) (*credentials.Credentials, error) {
	if c.File != "" {
		if _, err := os.Stat(c.File); err != nil {
			return nil, cairn.Errorf(cairn.CodeInvalid, "s3 backend: credentials file: %v", err)
		}
		return credentials.NewFileAWSCredentials(c.File, c.Profile), nil
	}
	idVar, secretVar, tokenVar := c.AccessKeyIDEnv, c.SecretAccessKeyEnv, c.SessionTokenEnv
	if idVar == "" {
		idVar = "AWS_ACCESS_KEY_ID"
	}
	if secretVar == "" {
		secretVar = "AWS_SECRET_ACCESS_KEY"
	}
	if tokenVar == "" {
		tokenVar = "AWS_SESSION_TOKEN"
	}
	id, secret := getenv(idVar), getenv(secretVar)
	if id == "" || secret == "" {
		return nil, cairn.Errorf(cairn.CodeUnavailable, "s3 backend: no credentials: set %s and %s in the hub's environment, or name a credentials file", idVar, secretVar)
	}
	return credentials.NewStaticV4(id, secret, getenv(tokenVar)), nil
}

func transport(t TLS) (http.RoundTripper, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if t.CAFile == "" {
		return tr, nil
	}
	pem, err := os.ReadFile(t.CAFile)
	if err != nil {
		return nil, cairn.Errorf(cairn.CodeInvalid, "s3 backend: tls.caFile: %v", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, cairn.Errorf(cairn.CodeInvalid, "s3 backend: tls.caFile %s holds no PEM certificate", t.CAFile)
	}
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return tr, nil
}

func (b *Backend) versionKey(id string, rv int) string {
	return fmt.Sprintf("%s%s/%010d.json", b.cfg.Prefix, id, rv)
}

func (b *Backend) lockKey(id string) string { return b.cfg.Prefix + id + "/lock" }

// s3Err classifies an S3 error for the hub: missing objects NotFound,
// failed preconditions AlreadyExists (or Conflict for the marker), the
// rest Unavailable; each message names the instance.
func s3Err(id, op string, err error) error {
	r := minio.ToErrorResponse(err)
	code := cairn.CodeUnavailable
	switch {
	case r.Code == "NoSuchKey" || r.StatusCode == http.StatusNotFound && r.Code != "NoSuchBucket":
		code = cairn.CodeNotFound
	case r.StatusCode == http.StatusPreconditionFailed || r.Code == "PreconditionFailed":
		code = cairn.CodeAlreadyExists
	case r.Code == "AccessDenied" || r.Code == "InvalidAccessKeyId" || r.Code == "SignatureDoesNotMatch":
		code = cairn.CodeUnavailable
	}
	// The service chose its message: bounded, printable.
	return &cairn.Error{Code: code, IDs: []string{id}, Msg: fmt.Sprintf("s3 backend: %s of instance %q: %s", op, id, cairn.BoundText(err.Error(), cairn.MaxErrorText)), Err: err}
}

func notFound(id, what string) error {
	return &cairn.Error{Code: cairn.CodeNotFound, IDs: []string{id}, Msg: fmt.Sprintf("s3 backend: instance %q: %s was not found", id, what)}
}

// lock reads an instance's marker: the owner and the marker's ETag.
// NotFound when the instance does not exist.
func (b *Backend) lock(ctx context.Context, id string) (owner, etag string, err error) {
	obj, err := b.client.GetObject(ctx, b.cfg.Bucket, b.lockKey(id), minio.GetObjectOptions{})
	if err != nil {
		return "", "", s3Err(id, "read the lock", err)
	}
	defer obj.Close()
	data, err := io.ReadAll(obj)
	if err != nil {
		if cairn.HasCode(s3Err(id, "", err), cairn.CodeNotFound) {
			return "", "", notFound(id, "the instance")
		}
		return "", "", s3Err(id, "read the lock", err)
	}
	info, err := obj.Stat()
	if err != nil {
		return "", "", s3Err(id, "read the lock", err)
	}
	return string(data), info.ETag, nil
}

// checkOwner refuses a change by someone other than the lock owner.
func (b *Backend) checkOwner(ctx context.Context, id, ownerID, op string) error {
	owner, _, err := b.lock(ctx, id)
	if err != nil {
		return err
	}
	if owner != "" && owner != ownerID {
		return &cairn.Error{Code: cairn.CodeLocked, IDs: []string{id},
			Msg: fmt.Sprintf("s3 backend: %s of instance %q: locked by %q", op, id, owner)}
	}
	return nil
}

func (b *Backend) put(ctx context.Context, id, key string, data []byte, opts minio.PutObjectOptions) error {
	if opts.ContentType == "" {
		opts.ContentType = "application/json"
	}
	_, err := b.client.PutObject(ctx, b.cfg.Bucket, key, bytes.NewReader(data), int64(len(data)), opts)
	return err
}

func createOnly() minio.PutObjectOptions {
	var o minio.PutObjectOptions
	o.SetMatchETagExcept("*") // If-None-Match: *
	return o
}

// GetPreCreateValue returns nil: the backend stores the values it is given.
func (b *Backend) GetPreCreateValue(ctx context.Context, req cairn.GetPreCreateValueRequest) (json.RawMessage, error) {
	return nil, nil
}

// OnCreate writes the marker, then resource version 1.
func (b *Backend) OnCreate(ctx context.Context, req cairn.OnCreateRequest) (json.RawMessage, error) {
	if err := b.put(ctx, req.InstanceID, b.lockKey(req.InstanceID), nil, createOnly()); err != nil {
		err = s3Err(req.InstanceID, "create", err)
		if cairn.HasCode(err, cairn.CodeAlreadyExists) {
			return nil, &cairn.Error{Code: cairn.CodeAlreadyExists, IDs: []string{req.InstanceID},
				Msg: fmt.Sprintf("s3 backend: instance %q already exists", req.InstanceID)}
		}
		return nil, err
	}
	if err := b.put(ctx, req.InstanceID, b.versionKey(req.InstanceID, 1), value(req.Value), createOnly()); err != nil {
		// Leave nothing behind: without its marker the instance does not exist.
		_ = b.client.RemoveObject(ctx, b.cfg.Bucket, b.lockKey(req.InstanceID), minio.RemoveObjectOptions{})
		return nil, s3Err(req.InstanceID, "create resource version 1", err)
	}
	return nil, nil
}

func value(v json.RawMessage) []byte {
	if v == nil {
		return []byte("null")
	}
	return v
}

// OnUpdate writes a new resource version, refusing one that exists.
func (b *Backend) OnUpdate(ctx context.Context, req cairn.OnUpdateRequest) (json.RawMessage, error) {
	if err := b.checkOwner(ctx, req.InstanceID, req.OwnerID, "update"); err != nil {
		return nil, err
	}
	err := b.put(ctx, req.InstanceID, b.versionKey(req.InstanceID, req.NewResourceVersion), value(req.NewValue), createOnly())
	if err != nil {
		err = s3Err(req.InstanceID, "update", err)
		if cairn.HasCode(err, cairn.CodeAlreadyExists) {
			return nil, &cairn.Error{Code: cairn.CodeAlreadyExists, IDs: []string{req.InstanceID},
				Msg: fmt.Sprintf("s3 backend: instance %q: resource version %d already exists", req.InstanceID, req.NewResourceVersion)}
		}
		return nil, err
	}
	return nil, nil
}

// OnDelete removes every resource version, then the marker.
func (b *Backend) OnDelete(ctx context.Context, req cairn.OnDeleteRequest) error {
	if err := b.checkOwner(ctx, req.InstanceID, req.OwnerID, "delete"); err != nil {
		return err
	}
	dir := b.cfg.Prefix + req.InstanceID + "/"
	for obj := range b.client.ListObjects(ctx, b.cfg.Bucket, minio.ListObjectsOptions{Prefix: dir, Recursive: true}) {
		if obj.Err != nil {
			return s3Err(req.InstanceID, "delete (list)", obj.Err)
		}
		if obj.Key == b.lockKey(req.InstanceID) {
			continue
		}
		if err := b.client.RemoveObject(ctx, b.cfg.Bucket, obj.Key, minio.RemoveObjectOptions{}); err != nil {
			return s3Err(req.InstanceID, "delete "+obj.Key, err)
		}
	}
	if err := b.client.RemoveObject(ctx, b.cfg.Bucket, b.lockKey(req.InstanceID), minio.RemoveObjectOptions{}); err != nil {
		return s3Err(req.InstanceID, "delete the lock", err)
	}
	return nil
}

// OnDeleteRevision removes one resource version.
func (b *Backend) OnDeleteRevision(ctx context.Context, req cairn.OnDeleteRevisionRequest) error {
	if err := b.checkOwner(ctx, req.InstanceID, req.OwnerID, "delete a resource version"); err != nil {
		return err
	}
	key := b.versionKey(req.InstanceID, req.ResourceVersion)
	if _, err := b.client.StatObject(ctx, b.cfg.Bucket, key, minio.StatObjectOptions{}); err != nil {
		err = s3Err(req.InstanceID, "delete resource version "+strconv.Itoa(req.ResourceVersion), err)
		if cairn.HasCode(err, cairn.CodeNotFound) {
			return notFound(req.InstanceID, fmt.Sprintf("resource version %d", req.ResourceVersion))
		}
		return err
	}
	if err := b.client.RemoveObject(ctx, b.cfg.Bucket, key, minio.RemoveObjectOptions{}); err != nil {
		return s3Err(req.InstanceID, "delete resource version "+strconv.Itoa(req.ResourceVersion), err)
	}
	return nil
}

// GetValue reads one resource version.
func (b *Backend) GetValue(ctx context.Context, req cairn.GetValueRequest) (json.RawMessage, error) {
	obj, err := b.client.GetObject(ctx, b.cfg.Bucket, b.versionKey(req.InstanceID, req.ResourceVersion), minio.GetObjectOptions{})
	if err == nil {
		defer obj.Close()
		var data []byte
		if data, err = io.ReadAll(obj); err == nil {
			return data, nil
		}
	}
	err = s3Err(req.InstanceID, fmt.Sprintf("read resource version %d", req.ResourceVersion), err)
	if cairn.HasCode(err, cairn.CodeNotFound) {
		return nil, notFound(req.InstanceID, fmt.Sprintf("resource version %d", req.ResourceVersion))
	}
	return nil, err
}

// GetLockedBy reads the marker.
func (b *Backend) GetLockedBy(ctx context.Context, req cairn.GetLockedByRequest) (string, error) {
	owner, _, err := b.lock(ctx, req.InstanceID)
	return owner, err
}

// OnLock records owner in the marker unless another owner holds it.
func (b *Backend) OnLock(ctx context.Context, req cairn.OnLockRequest) error {
	return b.setLock(ctx, req.InstanceID, req.LockedBy, true)
}

// OnUnlock clears the marker.
func (b *Backend) OnUnlock(ctx context.Context, req cairn.OnUnlockRequest) error {
	return b.setLock(ctx, req.InstanceID, "", false)
}

// setLock changes the marker with If-Match on the ETag it read, retrying
// when another writer changed it in between.
func (b *Backend) setLock(ctx context.Context, id, owner string, lock bool) error {
	for attempt := 0; ; attempt++ {
		cur, etag, err := b.lock(ctx, id)
		if err != nil {
			return err
		}
		if lock && cur != "" && cur != owner {
			return &cairn.Error{Code: cairn.CodeLocked, IDs: []string{id},
				Msg: fmt.Sprintf("s3 backend: lock instance %q: locked by %q", id, cur)}
		}
		if cur == owner {
			return nil
		}
		var opts minio.PutObjectOptions
		opts.SetMatchETag(etag)
		opts.ContentType = "text/plain"
		err = b.put(ctx, id, b.lockKey(id), []byte(owner), opts)
		if err == nil {
			return nil
		}
		if err := s3Err(id, "lock", err); !cairn.HasCode(err, cairn.CodeAlreadyExists) || attempt >= 10 {
			if cairn.HasCode(err, cairn.CodeAlreadyExists) {
				return &cairn.Error{Code: cairn.CodeConflict, IDs: []string{id}, Msg: fmt.Sprintf("s3 backend: lock of instance %q changed concurrently", id)}
			}
			return err
		}
	}
}

// Check asks the endpoint whether the bucket exists, for health checks.
func (b *Backend) Check(ctx context.Context) error {
	ok, err := b.client.BucketExists(ctx, b.cfg.Bucket)
	if err != nil {
		return fmt.Errorf("s3 backend: bucket %q: %w", b.cfg.Bucket, cairn.BoundError(err, cairn.MaxErrorText))
	}
	if !ok {
		return errors.New("s3 backend: bucket " + strconv.Quote(b.cfg.Bucket) + " does not exist")
	}
	return nil
}

// TLS reports whether the endpoint is https.
func (b *Backend) TLS() bool { return strings.HasPrefix(b.cfg.URL, "https://") }
