// Package audit writes one JSON line per request in the shape of the
// Kubernetes audit.k8s.io/v1 Event, to a file that is rotated by size.
// Events never carry values or credentials: the request object, at level
// Request, is reduced to its kind and identifying metadata.
package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/cairn-dev/cairn/internal/groupwrite"
)

// Level says how much of a request is recorded.
type Level string

// Levels, as in audit.k8s.io/v1.
const (
	LevelNone     Level = "None"
	LevelMetadata Level = "Metadata"
	LevelRequest  Level = "Request"
)

// ParseLevel reads a --audit-level value.
func ParseLevel(s string) (Level, error) {
	switch Level(s) {
	case LevelNone, LevelMetadata, LevelRequest:
		return Level(s), nil
	}
	return "", fmt.Errorf("audit level %q: want None, Metadata or Request", s)
}

// UserInfo is authentication.k8s.io/v1 UserInfo.
type UserInfo struct {
	Username string   `json:"username"`
	UID      string   `json:"uid,omitempty"`
	Groups   []string `json:"groups,omitempty"`
}

// ObjectRef names the object of a request.
type ObjectRef struct {
	Resource    string `json:"resource,omitempty"`
	Namespace   string `json:"namespace,omitempty"`
	Name        string `json:"name,omitempty"`
	APIGroup    string `json:"apiGroup,omitempty"`
	APIVersion  string `json:"apiVersion,omitempty"`
	Subresource string `json:"subresource,omitempty"`
}

// Status is the part of a metav1.Status the audit event keeps.
type Status struct {
	Code    int    `json:"code"`
	Status  string `json:"status,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// Event is an audit.k8s.io/v1 Event.
type Event struct {
	Kind                     string            `json:"kind"`
	APIVersion               string            `json:"apiVersion"`
	Level                    Level             `json:"level"`
	AuditID                  string            `json:"auditID"`
	Stage                    string            `json:"stage"`
	RequestURI               string            `json:"requestURI"`
	Verb                     string            `json:"verb"`
	User                     UserInfo          `json:"user"`
	ImpersonatedUser         *UserInfo         `json:"impersonatedUser,omitempty"`
	SourceIPs                []string          `json:"sourceIPs,omitempty"`
	UserAgent                string            `json:"userAgent,omitempty"`
	ObjectRef                *ObjectRef        `json:"objectRef,omitempty"`
	ResponseStatus           *Status           `json:"responseStatus,omitempty"`
	RequestObject            json.RawMessage   `json:"requestObject,omitempty"`
	RequestReceivedTimestamp time.Time         `json:"requestReceivedTimestamp"`
	StageTimestamp           time.Time         `json:"stageTimestamp"`
	Annotations              map[string]string `json:"annotations,omitempty"`
}

// NewEvent returns an Event with kind, apiVersion and stage set.
func NewEvent(level Level, id string, received time.Time) *Event {
	return &Event{Kind: "Event", APIVersion: "audit.k8s.io/v1", Level: level, AuditID: id,
		Stage: "ResponseComplete", RequestReceivedTimestamp: received.UTC()}
}

// Writer appends events to a file, rotating it when it would grow past
// MaxBytes: file becomes file.1, file.1 becomes file.2 and so on up to
// MaxBackups; older ones are removed. Events are handed to a goroutine
// that writes those gathered together (groupwrite), so a busy server does
// not pay a write to the file per request; an event is in the file
// moments after Write returns, at once after Flush or Close.
type Writer struct {
	out  *groupwrite.Writer
	file *file
	// lines hold the bytes of an event while it is encoded (*[]byte).
	lines sync.Pool
}

// file is the audit file and its rotation; groupwrite calls Write from
// one goroutine at a time, mu orders it with Close.
type file struct {
	path       string
	maxBytes   int64
	maxBackups int

	mu   sync.Mutex
	f    *os.File
	size int64
}

// Open opens (or creates, 0600) the audit file at path.
func Open(path string, maxBytes int64, maxBackups int) (*Writer, error) {
	if maxBytes <= 0 {
		maxBytes = 100 << 20
	}
	if maxBackups < 0 {
		maxBackups = 0
	}
	f := &file{path: path, maxBytes: maxBytes, maxBackups: maxBackups}
	if err := f.open(); err != nil {
		return nil, err
	}
	return &Writer{out: groupwrite.New(f), file: f}, nil
}

func (w *file) open() error {
	f, err := os.OpenFile(w.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("audit log: %w", err)
	}
	w.f, w.size = f, st.Size()
	return nil
}

// Write appends one event as a JSON line.
func (w *Writer) Write(ev *Event) error {
	ev.StageTimestamp = time.Now().UTC()
	bp, _ := w.lines.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	line := append(ev.appendJSON((*bp)[:0]), '\n')
	_, err := w.out.Write(line) // copies line: the buffer is free again
	if cap(line) <= 64<<10 {
		*bp = line
		w.lines.Put(bp)
	}
	return err
}

// Write appends whole lines, rotating before a line that would take the
// file past maxBytes (a group of lines may be split between files, a line
// never is).
func (w *file) Write(lines []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	written := 0
	for len(lines) > 0 {
		if w.f == nil {
			return written, fmt.Errorf("audit log %s is closed", w.path)
		}
		// As many whole lines as fit (at least one, into an empty file).
		n := 0
		for n < len(lines) {
			end := bytes.IndexByte(lines[n:], '\n')
			if end < 0 {
				end = len(lines) - n - 1
			}
			if w.size+int64(n+end+1) > w.maxBytes && (n > 0 || w.size > 0) {
				break
			}
			n += end + 1
		}
		if n == 0 {
			if err := w.rotate(); err != nil {
				return written, err
			}
			continue
		}
		m, err := w.f.Write(lines[:n])
		w.size += int64(m)
		written += m
		if err != nil {
			return written, fmt.Errorf("audit log: %w", err)
		}
		lines = lines[n:]
	}
	return written, nil
}

func (w *file) rotate() error {
	if err := w.f.Close(); err != nil {
		return fmt.Errorf("audit log: close for rotation: %w", err)
	}
	w.f = nil
	if w.maxBackups == 0 {
		if err := os.Remove(w.path); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("audit log: rotate: %w", err)
		}
	} else {
		os.Remove(fmt.Sprintf("%s.%d", w.path, w.maxBackups))
		for i := w.maxBackups - 1; i >= 1; i-- {
			if err := os.Rename(fmt.Sprintf("%s.%d", w.path, i), fmt.Sprintf("%s.%d", w.path, i+1)); err != nil && !os.IsNotExist(err) {
				return fmt.Errorf("audit log: rotate: %w", err)
			}
		}
		if err := os.Rename(w.path, w.path+".1"); err != nil {
			return fmt.Errorf("audit log: rotate: %w", err)
		}
	}
	return w.open()
}

// Flush waits until every event written so far is in the file.
func (w *Writer) Flush() error {
	return w.out.Flush()
}

// Close writes what is pending and closes the file.
func (w *Writer) Close() error {
	ferr := w.out.Flush()
	w.file.mu.Lock()
	defer w.file.mu.Unlock()
	if w.file.f == nil {
		return ferr
	}
	err := w.file.f.Close()
	w.file.f = nil
	return errors.Join(ferr, err)
}

// RequestObject reduces a request body to what may be recorded: apiVersion,
// kind and the identifying metadata (name, generateName, namespace, labels,
// resourceVersion, uid). Values, specs, annotations (kubectl's
// last-applied-configuration holds the whole object) and everything else
// are left out. A body that is not a JSON object gives nil.
func RequestObject(body []byte) json.RawMessage {
	var obj struct {
		APIVersion string `json:"apiVersion,omitempty"`
		Kind       string `json:"kind,omitempty"`
		Metadata   struct {
			Name            string            `json:"name,omitempty"`
			GenerateName    string            `json:"generateName,omitempty"`
			Namespace       string            `json:"namespace,omitempty"`
			UID             string            `json:"uid,omitempty"`
			ResourceVersion string            `json:"resourceVersion,omitempty"`
			Labels          map[string]string `json:"labels,omitempty"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(body, &obj); err != nil {
		return nil
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return nil
	}
	return out
}

// secretParam reports whether a query parameter is named like a
// credential, whose value never reaches the log: any name holding one of
// the words (refresh_token, X-Amz-Signature, client_secret, ...) or being
// a short one (key, sig).
func secretParam(name string) bool {
	n := strings.ToLower(name)
	for _, w := range []string{"token", "password", "passwd", "secret", "signature", "credential", "apikey", "api_key", "api-key"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	switch n {
	case "key", "sig", "auth", "authorization":
		return true
	}
	return false
}

// RequestURI is the path and query of u with the values of credential-like
// parameters replaced.
func RequestURI(u *url.URL) string {
	if u.RawQuery == "" {
		return u.EscapedPath()
	}
	q := u.Query()
	for k := range q {
		if secretParam(k) {
			q[k] = []string{"REDACTED"}
		}
	}
	return u.EscapedPath() + "?" + q.Encode()
}
